package list_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/lvskit/lvskit/names"
)

// goldenDir holds the transcripts of the real ipvsadm 1.31; the ipvsadm
// package replays them whole (ipvsadm/transcript_test.go), these tests
// read single outputs of them.
const goldenDir = "../../testscripts/golden"

// goldenResolver answers name questions like the VM that recorded the
// transcripts: its /etc/hosts and Debian 12's /etc/services, no DNS.
func goldenResolver() *names.Resolver {
	return names.NewResolverFiles(filepath.Join(goldenDir, "hosts"), "../../names/testdata/services", "")
}

// recorded is what one step of a transcript printed.
type recorded struct{ out, err string }

// readGolden returns what step id ("r2/088": transcript r2, step 088)
// printed; an output the archive does not hold was empty.
func readGolden(t *testing.T, id string) recorded {
	t.Helper()
	run, step, _ := strings.Cut(id, "/")
	a, err := txtar.ParseFile(filepath.Join(goldenDir, run+".txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(a.Comment), "\n# "+step) {
		t.Fatalf("%s has no step %s", run, step)
	}
	var r recorded
	for _, f := range a.Files {
		switch f.Name {
		case step + ".out":
			r.out = string(f.Data)
		case step + ".err":
			r.err = string(f.Data)
		}
	}
	return r
}

// diffLines shows the first differing lines of two texts.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d\n  want %q\n  got  %q\n", i+1, wl, gl)
			if shown++; shown == 8 {
				break
			}
		}
	}
	return b.String()
}
