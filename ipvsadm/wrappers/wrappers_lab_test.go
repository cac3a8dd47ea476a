//go:build lab

package wrappers

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/lab/labtest"
)

// labWrapperCases run a wrapper script with arguments and input after the
// table was filled by setup.
var labWrapperCases = []struct {
	name, setup string
	prog        string
	args        []string
	input       string
}{
	{"save", labSetup, "ipvsadm-save", nil, ""},
	{"save -n", labSetup, "ipvsadm-save", []string{"-n"}, ""},
	{"save ignores words", labSetup, "ipvsadm-save", []string{"foo", "-n", "bar"}, ""},
	{"save usage", labSetup, "ipvsadm-save", []string{"-n", "-x"}, ""},
	{"save usage for --", labSetup, "ipvsadm-save", []string{"--"}, ""},
	{"save usage for -", labSetup, "ipvsadm-save", []string{"-"}, ""},
	{"save empty table", "", "ipvsadm-save", []string{"-n"}, ""},
	{"restore empty input flushes", labSetup, "ipvsadm-restore", nil, ""},
	{"restore comments and rules", labSetup, "ipvsadm-restore", nil, "# ipvsadm.rules\n-A -t 10.0.0.5:80 -s rr\n#-A -t 10.0.0.6:80\n-a -t 10.0.0.5:80 -r 192.168.10.1:80 -m\n\n\n"},
	{"restore ignores arguments", labSetup, "ipvsadm-restore", []string{"-n", "foo"}, "-A -t 10.0.0.5:80\n"},
	{"restore indented comment stops", labSetup, "ipvsadm-restore", nil, "-A -t 10.0.0.5:80\n  # comment\n-A -t 10.0.0.6:80\n"},
	{"restore only comments", labSetup, "ipvsadm-restore", nil, "# one\n#two"},
	{"restore kernel error in the middle", labSetup, "ipvsadm-restore", nil, "-A -t 10.0.0.5:80\n-A -t 10.0.0.5:80\n-A -t 10.0.0.6:80"},
	{"restore kernel error last", labSetup, "ipvsadm-restore", nil, "-A -t 10.0.0.5:80\n-A -t 10.0.0.5:80\n"},
	{"restore validation error", labSetup, "ipvsadm-restore", nil, "-A -t 10.0.0.5:80\n-A -t 10.0.0.6\n-A -t 10.0.0.7:80\n"},
	{"restore trailing blanks kept", labSetup, "ipvsadm-restore", nil, "-A -t 10.0.0.5:80   "},
	{"restore echo option", labSetup, "ipvsadm-restore", nil, "-n\n"},
	{"restore -e", labSetup, "ipvsadm-restore", nil, "#x\n-e\n\n"},
	{"restore listing", labSetup, "ipvsadm-restore", nil, "-A -t 10.0.0.5:80\n-S -n\n-L -n\n"},
	{"restore CRLF", labSetup, "ipvsadm-restore", nil, "-A -t 10.0.0.5:80\r\n#c\r\n-a -t 10.0.0.5:80 -r 10.1.1.1\r\n"},
	{"restore unknown scheduler", labSetup, "ipvsadm-restore", nil, "-A -t 10.0.0.5:80 -s rr\n-A -t 10.1.1.1:80 -s wrrr\n-A -t 10.0.0.6:80\n"},
	{"restore unknown persistence engine", labSetup, "ipvsadm-restore", nil, "-A -u 10.0.0.5:5060 -p 60 --pe nosuch\n-A -t 10.0.0.6:80\n"},
}

// labSetup is a table for the wrappers to save or replace.
const labSetup = "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 192.168.10.1:80 -m -w 2\n-A -u 10.0.0.2:53 -p 60\n-A -f 3 -s sh -b sh-port\n-a -f 3 -r 192.168.10.2 -g\n"

// TestLabWrappersLikeDebian runs our ipvsadm-save and ipvsadm-restore and
// Debian's scripts on the same cases.
func TestLabWrappersLikeDebian(t *testing.T) {
	labtest.Require(t)
	for _, tc := range labWrapperCases {
		run := func(prog, ipvsadm string) func(t *testing.T) labtest.Result {
			return func(t *testing.T) labtest.Result {
				if tc.setup != "" {
					if r := labtest.RunClean(t, tc.setup, ipvsadm, "-R"); r.Code != 0 {
						t.Fatalf("setup: %+v", r)
					}
				}
				return labtest.RunClean(t, tc.input, prog, tc.args...)
			}
		}
		ref := labtest.InFreshNetns(t, tc.name+"/reference", run(filepath.Join(filepath.Dir(labtest.RefIpvsadmSave), tc.prog), labtest.RefIpvsadm))
		ours := labtest.InFreshNetns(t, tc.name+"/ours", run(labtest.Ours(tc.prog), labtest.Ours("ipvsadm")))
		what := fmt.Sprintf("%s %q (input %q)", tc.prog, tc.args, tc.input)
		if !wrapperRefusals[tc.name] {
			labtest.CompareOutcomes(t, what, ref, ours, true)
			continue
		}
		// A deliberate difference (docs/compatibility.md): Debian's script
		// flushes and restores a prefix, or every line but those the
		// kernel refused; ours refuses before flushing.
		setupOnly := labtest.InFreshNetns(t, tc.name+"/setup only", func(t *testing.T) labtest.Result {
			return labtest.RunClean(t, tc.setup, labtest.Ours("ipvsadm"), "-R")
		})
		t.Logf("%s: reference status %d, its table afterwards:\n%s", what, ref.Run.Code, ref.RefSave.Stdout)
		if ours.Run.Code != 1 || !strings.Contains(ours.Run.Stderr, "input refused; the IPVS table was not changed") {
			t.Errorf("%s: ours should refuse the input: %+v", what, ours.Run)
		}
		// For a line the kernel refused, ours prints the messages ipvsadm
		// printed under Debian's script, then names the lines.
		if kernelRefusals[tc.name] && (ref.Run.Stderr == "" || !strings.HasPrefix(ours.Run.Stderr, ref.Run.Stderr) ||
			!strings.Contains(ours.Run.Stderr, "in a trial restore into an empty scratch network namespace")) {
			t.Errorf("%s: ours printed %q, want the reference's messages %q first, then the failed lines", what, ours.Run.Stderr, ref.Run.Stderr)
		}
		if ours.RefSave.Stdout != setupOnly.RefSave.Stdout {
			t.Errorf("%s: ours changed the table although it refused the input:\nbefore:\n%s\nafter:\n%s", what, setupOnly.RefSave.Stdout, ours.RefSave.Stdout)
		}
	}
}

// wrapperRefusals are the labWrapperCases whose input holds a line that
// does not parse or that the kernel refuses: where Debian's
// ipvsadm-restore flushes the table and restores what it can, ours
// refuses before changing anything.
var wrapperRefusals = map[string]bool{
	"restore indented comment stops":     true,
	"restore validation error":           true,
	"restore echo option":                true,
	"restore -e":                         true,
	"restore kernel error in the middle": true,
	"restore kernel error last":          true,
	"restore unknown scheduler":          true,
	"restore unknown persistence engine": true,
}

// kernelRefusals are the wrapperRefusals for a line the kernel refuses.
var kernelRefusals = map[string]bool{
	"restore kernel error in the middle": true,
	"restore kernel error last":          true,
	"restore unknown scheduler":          true,
	"restore unknown persistence engine": true,
}
