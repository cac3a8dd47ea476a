package completions_test

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/lvsctl"
)

// lvsctl's command line is defined by its kong model; as for lvsprep, these
// tests read the commands and flags from its --help output (lvsctl.Run, in
// process) and require the manual page and the three completions to offer
// exactly those.

func lvsctlHelp(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := lvsctl.Main(append(append([]string{"lvsctl"}, args...), "--help"), nil, &stdout, &stderr, lvsctl.Env{}); code != 0 || stderr.Len() > 0 {
		t.Fatalf("lvsctl %q --help: status %d, stderr %q", args, code, stderr.String())
	}
	return stdout.String()
}

// lvsctlModel returns lvsctl's commands and the flags of each (global ones
// included, as kong's help lists them).
func lvsctlModel(t *testing.T) map[string][]string {
	t.Helper()
	top := lvsctlHelp(t)
	_, cmds, ok := strings.Cut(top, "\nCommands:\n")
	if !ok {
		t.Fatalf("no Commands section in lvsctl --help:\n%s", top)
	}
	cmds, _, _ = strings.Cut(cmds, "\n\n")
	model := map[string][]string{}
	for _, m := range kongCommand.FindAllStringSubmatch(cmds, -1) {
		// "import keepalived <FILE>": the command is the words before
		// the arguments.
		var words []string
		for _, w := range strings.Fields(m[1]) {
			if strings.HasPrefix(w, "<") || strings.HasPrefix(w, "[") {
				break
			}
			words = append(words, w)
		}
		name := strings.Join(words, " ")
		var flags []string
		for _, f := range kongFlag.FindAllStringSubmatch(lvsctlHelp(t, words...), -1) {
			if f[1] != "" {
				flags = append(flags, f[1])
			}
			flags = append(flags, f[2])
		}
		model[name] = join(flags)
	}
	if len(model) != 9 {
		t.Fatalf("lvsctl --help lists %d commands, this test knows list, plan, apply, status, run, top, withdraw, announce and import keepalived: %q", len(model), slices.Sorted(mapKeys(model)))
	}
	return model
}

func TestLvsctlManPageDocumentsExactlyItsFlags(t *testing.T) {
	model := lvsctlModel(t)
	var all []string
	for _, flags := range model {
		all = append(all, flags...)
	}
	diff(t, "lvsctl(8) .TP entries", manOptions(t, "../man/lvsctl.8"), all)
	b, err := os.ReadFile("../man/lvsctl.8")
	if err != nil {
		t.Fatal(err)
	}
	for cmd := range model {
		if !strings.Contains(string(b), "\n.TP\n\\fB"+cmd+"\\fR\n") {
			t.Errorf("lvsctl(8) has no entry for command %q", cmd)
		}
	}
}

// TestLvsctlCompletionsOfferExactlyItsCommandsAndFlags: the completions
// offer the commands, and for each command exactly its flags.
func TestLvsctlCompletionsOfferExactlyItsCommandsAndFlags(t *testing.T) {
	model := lvsctlModel(t)
	var first []string
	subs := map[string][]string{}
	for cmd := range model {
		w := strings.Fields(cmd)
		first = append(first, w[0])
		if len(w) == 2 {
			subs[w[0]] = append(subs[w[0]], w[1])
		}
	}
	checks := []completionCheck{{"lvsctl ", first}}
	for cmd, sub := range subs {
		checks = append(checks, completionCheck{"lvsctl " + cmd + " ", sub})
	}
	for cmd, flags := range model {
		checks = append(checks, completionCheck{"lvsctl " + cmd + " -", flags})
	}
	slices.SortFunc(checks, func(a, b completionCheck) int { return strings.Compare(a.line, b.line) })
	inEveryShell(t, checks, offersExactly)
}
