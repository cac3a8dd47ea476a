package health

import (
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	prev := -1
	for d := time.Duration(0); d < 100*time.Second; d = d*11/10 + time.Microsecond {
		i := bucketOf(d)
		if i < prev {
			t.Fatalf("bucket of %s is %d, below the bucket %d of a shorter one", d, i, prev)
		}
		prev = i
		top := bucketTop(i)
		low := time.Duration(0)
		if i > 0 {
			low = bucketTop(i - 1)
		}
		if d < low || d >= top+time.Microsecond {
			t.Errorf("%s in bucket %d [%s, %s)", d, i, low, top)
		}
		if i >= 4 && top-low > low/4 {
			t.Errorf("bucket %d [%s, %s) is wider than a quarter", i, low, top)
		}
	}
}

func TestLatenessP99AndWindows(t *testing.T) {
	var l lateness
	t0 := time.Unix(1000, 0)
	for i := 1; i <= 1000; i++ {
		l.add(time.Duration(i)*time.Millisecond, t0)
	}
	s := l.stats(t0)
	if s.Count != 1000 || s.Max != time.Second || s.RecentCount != 1000 {
		t.Errorf("stats %+v, want 1000 samples up to 1s", s)
	}
	if s.P99 < 990*time.Millisecond || s.P99 > 990*time.Millisecond*5/4 || s.RecentP99 != s.P99 {
		t.Errorf("p99 %s (recent %s) of 1..1000ms, want 990ms to a quarter above", s.P99, s.RecentP99)
	}
	// A window later the samples are still recent; two later, gone.
	l.add(time.Millisecond, t0.Add(latenessWindow))
	if s := l.stats(t0.Add(latenessWindow)); s.RecentCount != 1001 || s.RecentMax != time.Second {
		t.Errorf("a window later: %+v, want all 1001 samples recent", s)
	}
	s = l.stats(t0.Add(2*latenessWindow + time.Second))
	if s.RecentCount != 1 || s.RecentMax != time.Millisecond || s.RecentP99 != time.Millisecond || s.Count != 1001 {
		t.Errorf("two windows later: %+v, want one recent sample of 1ms, 1001 in all", s)
	}
	if s := l.stats(t0.Add(10 * latenessWindow)); s.RecentCount != 0 || s.RecentP99 != 0 || s.Max != time.Second {
		t.Errorf("long after: %+v, want no recent samples", s)
	}
}
