package health

import (
	"math/bits"
	"time"
)

// Lateness summarises how late probes started: a probe's lateness is its
// actual start minus its scheduled start. P99 values are estimates, at
// most a quarter above the true figure (and never above Max).
type Lateness struct {
	// Count, Max and P99 cover every probe since the checker started.
	Count uint64        `json:"count"`
	Max   time.Duration `json:"max"`
	P99   time.Duration `json:"p99"`
	// Recent* cover the probes of the last 30 to 60 seconds.
	RecentCount uint64        `json:"recent_count"`
	RecentMax   time.Duration `json:"recent_max"`
	RecentP99   time.Duration `json:"recent_p99"`
}

// latenessWindow is the span of one window of recent lateness; the recent
// figures cover the current window and the one before.
const latenessWindow = 30 * time.Second

// histogram counts durations in buckets of microseconds: exact below 4µs,
// then four buckets per power of two (each at most 25 % wide).
type histogram struct {
	counts [4 + 4*40]uint64
	count  uint64
	max    time.Duration
}

func bucketOf(d time.Duration) int {
	us := uint64(d / time.Microsecond)
	if us < 4 {
		return int(us)
	}
	e := bits.Len64(us) - 1 // 2 and up
	i := 4 + (e-2)*4 + int(us>>(e-2)&3)
	return min(i, len(histogram{}.counts)-1)
}

// bucketTop is the exclusive upper bound of bucket i.
func bucketTop(i int) time.Duration {
	if i < 4 {
		return time.Duration(i+1) * time.Microsecond
	}
	e, sub := (i-4)/4+2, (i-4)%4
	return time.Duration((5+sub)<<(e-2)) * time.Microsecond
}

func (h *histogram) add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.count++
	h.max = max(h.max, d)
}

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.count += o.count
	h.max = max(h.max, o.max)
}

func (h *histogram) p99() time.Duration {
	if h.count == 0 {
		return 0
	}
	rank := (h.count*99 + 99) / 100 // ceil(0.99 count)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketTop(i), h.max)
		}
	}
	return h.max
}

// lateness keeps the histogram since the start and two rotating windows.
type lateness struct {
	total, cur, prev histogram
	curStart         time.Time
}

// rotate makes cur the window holding now.
func (l *lateness) rotate(now time.Time) {
	switch age := now.Sub(l.curStart); {
	case l.curStart.IsZero():
		l.curStart = now
	case age >= 2*latenessWindow:
		l.prev, l.cur = histogram{}, histogram{}
		l.curStart = now
	case age >= latenessWindow:
		l.prev, l.cur = l.cur, histogram{}
		l.curStart = l.curStart.Add(latenessWindow)
	}
}

func (l *lateness) add(d time.Duration, now time.Time) {
	l.rotate(now)
	l.total.add(d)
	l.cur.add(d)
}

func (l *lateness) stats(now time.Time) Lateness {
	l.rotate(now)
	recent := l.prev
	recent.merge(&l.cur)
	return Lateness{
		Count: l.total.count, Max: l.total.max, P99: l.total.p99(),
		RecentCount: recent.count, RecentMax: recent.max, RecentP99: recent.p99(),
	}
}
