//go:build lab

package testscripts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/lab/labtest"
)

// brokenIpvsadm stands in for our ipvsadm in the negative control: the
// reference binary, except for a few command lines where it differs in
// exactly one way each.
const brokenIpvsadm = `#!/bin/sh
case "$*" in
"-A -t 10.0.0.1:80") exec /usr/sbin/ipvsadm -A -t 10.0.0.1:80 -s rr ;;
"-L -n -t 10.0.0.2:80") /usr/sbin/ipvsadm "$@" | sed 's/$/ /'; exit 0 ;;
"-E -t 10.0.0.9:80") /usr/sbin/ipvsadm "$@"; exit 3 ;;
"-L --bogus") echo "--bogus: unknown opt" >&2; exit 255 ;;
"-a -t 10.0.0.2:80 -r 10.1.1.1 -m -w 5") exec /usr/sbin/ipvsadm -a -t 10.0.0.2:80 -r 10.1.1.1 -m -w 6 ;;
esac
exec /usr/sbin/ipvsadm "$@"
`

// controlCorpus exercises each difference of brokenIpvsadm once, with
// lines in between that must still compare identical.
const controlCorpus = `# negative control
ipvsadm -A -t 10.0.0.1:80
ipvsadm -A -t 10.0.0.2:80 -s wrr
@same ipvsadm -L -n -t 10.0.0.2:80
ipvsadm -D -t 10.0.0.1:80
ipvsadm -E -t 10.0.0.9:80
ipvsadm -L --bogus
@timing ipvsadm -L -n --rate
ipvsadm -L -n; ipvsadm -S -n
ipvsadm -a -t 10.0.0.2:80 -r 10.1.1.1 -m -w 5
`

// TestDifferentialDetectsDifferences runs the differential runner against
// an "ours" that differs from the reference in known ways, and checks that
// every difference is reported — stdout, stderr, exit status, a silent
// kernel-state change, the end-of-file reference snapshot — and that
// nothing else is.
func TestDifferentialDetectsDifferences(t *testing.T) {
	labtest.Require(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ipvsadm"), []byte(brokenIpvsadm), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"ipvsadm-save", "ipvsadm-restore"} {
		if err := os.Symlink(filepath.Join("/usr/sbin", p), filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := parseCorpus("control.txt", strings.NewReader(controlCorpus))
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	res := &fileResult{name: "control.txt"}
	runFile(t, lines, res, dir, func(format string, args ...any) {
		reports = append(reports, fmt.Sprintf(format, args...))
	})
	all := strings.Join(reports, "\n")
	t.Logf("the runner reported:\n%s", all)

	want := []struct{ line, text string }{
		{"control.txt:2: ipvsadm -A -t 10.0.0.1:80\n", `+"service af=2 protocol=6 addr=0a000001000000000000000000000000 port=80 sched=\"rr\"`},
		{"control.txt:4: @same ipvsadm -L -n -t 10.0.0.2:80\n", "  stdout (-reference +ours):\n"},
		{"control.txt:6: ipvsadm -E -t 10.0.0.9:80\n", "  exit status: reference 255, ours 3\n"},
		{"control.txt:7: ipvsadm -L --bogus\n", `+"--bogus: unknown opt"`},
		{"control.txt:10: ipvsadm -a -t 10.0.0.2:80 -r 10.1.1.1 -m -w 5\n", `+"  dest addr=0a010101000000000000000000000000 port=80 fwd=0 weight=6`},
		{"control.txt: at the end, the reference ipvsadm lists different tables", `+"-a -t 10.0.0.2:80 -r 10.1.1.1:80 -m -w 6"`},
	}
	if len(reports) != len(want) {
		t.Errorf("%d reports, want %d (one per planted difference)", len(reports), len(want))
	}
	for _, w := range want {
		found := false
		for _, r := range reports {
			if strings.HasPrefix(r, w.line) && strings.Contains(r, w.text) {
				found = true
			}
		}
		if !found {
			t.Errorf("no report starting %q containing %q", w.line, w.text)
		}
	}
	// Lines 5, 8 and 9 (four invocations) compare identical. Line 3 does
	// not: the kernel state still differs after it (line 2's divergence,
	// reported once).
	if res.invocations != 10 || res.identical != 4 {
		t.Errorf("invocations %d, identical %d; want 10 and 4", res.invocations, res.identical)
	}
}
