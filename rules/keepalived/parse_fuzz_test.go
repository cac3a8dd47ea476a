package keepalived

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse: parse on any file, with an include beside it and any
// instance, ends without a panic, twice the same, and every statement
// names a line of the file its text comes from.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/oracle/48-definitions-seq.conf", "testdata/public/keepalived-doc-definitions.conf", "testdata/oracle/39-comments-quotes.conf"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "lb1")
	}
	f.Add([]byte("$M=a $i \\\nb { \\\n\n~SEQx(i, 1, 2, 0x10) $M\n@lb1 include inc.conf\n~LST({x,y}, {1,2}, {3}) k ${x}$y } {\n"), "lb1")
	f.Add([]byte("$A=${B}$B\n$B=$_HASH\nk $A \"q{\" \\#\n@^x ~SEQ(i, $N) k\ninclude {inc,no}.conf\n"), "x")
	inc := "$N=3\nk $N {\n}\n"
	fsys := FS{
		ReadFile: func(name string) ([]byte, error) {
			if name == "inc.conf" {
				return []byte(inc), nil
			}
			return nil, os.ErrNotExist
		},
		Glob: func(p string) ([]string, error) {
			if p == "inc.conf" {
				return []string{p}, nil
			}
			return nil, nil
		},
	}
	// Limits a thousandth of parse's: an input that reaches one costs
	// milliseconds, not seconds.
	saved := []int{maxReplacements, maxReplacementsAll, int(maxRepeats), maxMade}
	maxReplacements, maxReplacementsAll, maxRepeats, maxMade = 100, 1<<12, 1<<10, 1<<11
	f.Cleanup(func() {
		maxReplacements, maxReplacementsAll, maxRepeats, maxMade = saved[0], saved[1], int64(saved[2]), saved[3]
	})
	f.Fuzz(func(t *testing.T, data []byte, id string) {
		stmts, notes, err := parse("k.conf", data, fsys, id)
		stmts2, notes2, err2 := parse("k.conf", data, fsys, id)
		if !reflect.DeepEqual(stmts, stmts2) || !reflect.DeepEqual(notes, notes2) || (err == nil) != (err2 == nil) {
			t.Fatalf("two parses differ")
		}
		if err != nil {
			return
		}
		count := map[string]int{"k.conf": strings.Count(string(data), "\n") + 1, "inc.conf": strings.Count(inc, "\n") + 1}
		for _, s := range stmts {
			if n, ok := count[s.File]; !ok || s.Line < 1 || s.Line > n {
				t.Fatalf("statement %+v: no such line", s)
			}
			if (s.Brace == 0) == (len(s.Words) == 0) {
				t.Fatalf("statement %+v: words and a brace", s)
			}
		}
	})
}
