package completions_test

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/lvsprep"
)

// lvsprep's command line is defined by its kong model; its --help output is
// how the model shows itself. These tests read the commands and flags from
// that output (lvsprep.Main, in process) and require the manual page and the
// three completions to offer exactly those.

// lvsprepHelp runs lvsprep with args and returns its help output.
func lvsprepHelp(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := lvsprep.Main(append(append([]string{"lvsprep"}, args...), "--help"), nil, &stdout, &stderr, lvsprep.RealHost(nil)); code != 0 || stderr.Len() > 0 {
		t.Fatalf("lvsprep %q --help: status %d, stderr %q", args, code, stderr.String())
	}
	return stdout.String()
}

var (
	kongFlag    = regexp.MustCompile(`(?m)^\s+(?:(-[A-Za-z]), )?(--[a-z][-a-z0-9]*)`)
	kongCommand = regexp.MustCompile(`(?m)^  (\S.*?)(?:\s{2,}|$)`)
)

// lvsprepModel returns lvsprep's leaf commands ("director nat", "realserver
// dr", "check director nat", "status", with aliases written as the help
// shows them: "realserver (rs) dr") and the flags of each, and under "" the
// flags of lvsprep itself (before any command).
func lvsprepModel(t *testing.T) map[string][]string {
	t.Helper()
	top := lvsprepHelp(t)
	_, cmds, ok := strings.Cut(top, "\nCommands:\n")
	if !ok {
		t.Fatalf("no Commands section in lvsprep --help:\n%s", top)
	}
	cmds, _, _ = strings.Cut(cmds, "\n\n")
	model := map[string][]string{"": helpFlags(top)}
	for _, m := range kongCommand.FindAllStringSubmatch(cmds, -1) {
		words := strings.Fields(strings.NewReplacer("(rs) ", "").Replace(m[1]))
		model[strings.Join(words, " ")] = helpFlags(lvsprepHelp(t, words...))
	}
	if len(model) != 20 {
		t.Fatalf("lvsprep --help lists %d commands, this test knows the 19 of director {nat,fullnat,dr,tun,ecmp}, "+
			"realserver {dr,tun,nat}, check of each, status, and bird {director,router}: %q", len(model)-1, slices.Sorted(mapKeys(model)))
	}
	return model
}

// helpFlags are the flags a --help text lists, short and long.
func helpFlags(help string) []string {
	// Only the flags' lines: not the examples at the end.
	help, _, _ = strings.Cut(help, "\nExamples:\n")
	var flags []string
	for _, f := range kongFlag.FindAllStringSubmatch(help, -1) {
		if f[1] != "" {
			flags = append(flags, f[1])
		}
		flags = append(flags, f[2])
	}
	return join(flags)
}

func mapKeys(m map[string][]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestLvsprepManPageDocumentsExactlyItsFlags(t *testing.T) {
	model := lvsprepModel(t)
	var all []string
	for _, flags := range model {
		all = append(all, flags...)
	}
	diff(t, "lvsprep(8) .TP entries", manOptions(t, "../man/lvsprep.8"), all)

	// Every command has its own entry.
	b, err := os.ReadFile("../man/lvsprep.8")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for cmd := range model {
		if cmd == "" {
			continue
		}
		name := strings.TrimPrefix(cmd, "check ")
		if strings.HasPrefix(cmd, "check ") {
			name = "check"
		}
		tag := `\fB` + name + `\fR`
		if strings.HasPrefix(name, "director dr") || strings.HasPrefix(name, "director tun") {
			tag = `\fBdirector dr\fR, \fBdirector tun\fR`
		}
		if !strings.Contains(src, "\n.TP\n"+tag) {
			t.Errorf("lvsprep(8) has no entry for %q (looked for %q)", cmd, tag)
		}
	}
}

// TestLvsprepCompletionsOfferExactlyItsCommandsAndFlags: at each level the
// completions offer the next command words, and for each command exactly
// its flags.
func TestLvsprepCompletionsOfferExactlyItsCommandsAndFlags(t *testing.T) {
	model := lvsprepModel(t)
	// Command words reachable after each prefix, from the model's leaves.
	next := map[string][]string{}
	for cmd := range model {
		words := strings.Fields(cmd)
		for i := range words {
			prefix := strings.Join(words[:i], " ")
			next[prefix] = append(next[prefix], words[i])
			if words[i] == "realserver" {
				next[prefix] = append(next[prefix], "rs")
			}
		}
	}
	var checks []completionCheck
	for prefix, words := range next {
		checks = append(checks, completionCheck{strings.TrimSpace("lvsprep "+prefix) + " ", words})
	}
	for cmd, flags := range model {
		checks = append(checks, completionCheck{strings.Join(strings.Fields("lvsprep "+cmd), " ") + " -", flags})
		if strings.Contains(cmd, "realserver") {
			// The alias works the same.
			checks = append(checks, completionCheck{"lvsprep " + strings.Replace(cmd, "realserver", "rs", 1) + " -", flags})
		}
	}
	slices.SortFunc(checks, func(a, b completionCheck) int { return strings.Compare(a.line, b.line) })
	inEveryShell(t, checks, offersExactly)
}
