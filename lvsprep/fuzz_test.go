package lvsprep

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzDecodeState feeds arbitrary bytes to the state decoder, which is what
// stands between a file under the state directory and root's --undo. The
// committed corpus (testdata/fuzz/FuzzDecodeState) holds the state files of
// every profile, interrupted ones, and the planted core_pattern attack.
// Whatever it accepts must name only steps of its own profile (so only the
// profile's sysctls, all under net/), and must survive a round trip.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(plantedState))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, p, err := decodeState(b)
		if err != nil {
			return
		}
		for _, rec := range st.Records {
			if !slices.ContainsFunc(p.Steps, func(s step) bool { return sameStep(s, rec.step) }) {
				t.Fatalf("accepted a record of no step of %s: %+v", p.describe(), rec)
			}
			if rec.Kind == kindSysctl && !strings.HasPrefix(rec.Sysctl, "net/") {
				t.Fatalf("accepted sysctl %s", rec.Sysctl)
			}
			if rec.Kind == kindModule && strings.HasPrefix(rec.Module, "-") {
				t.Fatalf("accepted module %q", rec.Module)
			}
		}
		again, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		st2, p2, err := decodeState(again)
		if err != nil || p2.Key != p.Key || len(st2.Records) != len(st.Records) {
			t.Fatalf("round trip: %v (%s vs %s)", err, p2.Key, p.Key)
		}
	})
}

// TestCorpusStateFilesDecode: the corpus's state files, written by lvsprep
// itself, are accepted (the fuzzer starts from valid files), the planted
// one is not.
func TestCorpusStateFilesDecode(t *testing.T) {
	files, _ := filepath.Glob("testdata/fuzz/FuzzDecodeState/*")
	if len(files) < 10 {
		t.Fatalf("corpus has %d files", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// The corpus format: a header line, then []byte("...").
		_, lit, _ := strings.Cut(string(b), "[]byte(")
		s, err := strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(lit), ")")))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		_, _, err = decodeState([]byte(s))
		if planted := strings.Contains(f, "planted"); (err == nil) == planted {
			t.Errorf("%s: decode error %v", f, err)
		}
	}
}
