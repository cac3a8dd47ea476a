package completions_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvsadm/cmdline"
)

// One source of truth: the parser's option table (cmdline.OptionTable) and its
// command/option matrix (cmdline.Allowed) decide which options exist and
// which command accepts which. These tests fail when the manual page, the
// -h text or any completion names an option the parser does not have, or
// lacks one it has.

// parserOptions is every option spelling the parser accepts: --long and
// each -short letter.
func parserOptions(t *testing.T) []string {
	t.Helper()
	var all []string
	for _, o := range cmdline.OptionTable {
		all = append(all, spellings(o)...)
	}
	slices.Sort(all)
	if len(all) < 70 || len(all) != len(slices.Compact(slices.Clone(all))) {
		t.Fatalf("implausible option table: %d spellings (duplicates?) %q", len(all), all)
	}
	return all
}

func spellings(o cmdline.OptionSpec) []string {
	s := []string{"--" + o.Long}
	for _, c := range o.Short {
		s = append(s, "-"+string(c))
	}
	return s
}

// diff reports the spellings only in got and only in want.
func diff(t *testing.T, what string, got, want []string) {
	t.Helper()
	got, want = join(got), join(want)
	var extra, missing []string
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	if len(extra) > 0 || len(missing) > 0 {
		t.Errorf("%s: not in the parser: %q; missing: %q", what, extra, missing)
	}
}

var (
	manFont   = regexp.MustCompile(`\\f[BIRP]|\\f\(..|\\&`)
	optToken  = regexp.MustCompile(`(?:^|[\s,|\[{(])(--?[A-Za-z0-9][-A-Za-z0-9]*)`)
	longToken = regexp.MustCompile(`--[a-z][-a-z0-9]*`)
	// A short option in the -h text: "-x" standing alone or after '|' or '['.
	helpShort = regexp.MustCompile(`(?:^|[\s|\[])(-[A-Za-z0-9])(?:$|[\s|\]])`)
)

// manOptions returns the options the page documents: every option spelling
// in the tag line of a .TP entry.
func manOptions(t *testing.T, page string) []string {
	t.Helper()
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	var opts []string
	for i, l := range lines {
		if strings.TrimSpace(l) != ".TP" || i+1 >= len(lines) {
			continue
		}
		tag := strings.ReplaceAll(manFont.ReplaceAllString(lines[i+1], ""), `\-`, "-")
		for _, m := range optToken.FindAllStringSubmatch(tag, -1) {
			opts = append(opts, m[1])
		}
	}
	return opts
}

func TestManPageDocumentsExactlyTheParserOptions(t *testing.T) {
	diff(t, "ipvsadm(8) .TP entries", manOptions(t, "../man/ipvsadm.8"), parserOptions(t))
}

// helpOptions returns the option spellings in the -h text.
func helpOptions(text string) []string {
	var opts []string
	opts = append(opts, longToken.FindAllString(text, -1)...)
	for _, line := range strings.Split(text, "\n") {
		for _, m := range helpShort.FindAllStringSubmatch(line, -1) {
			opts = append(opts, m[1])
		}
		// "-A|E" and "-L|l" in the Usage lines name short options too.
		for _, m := range regexp.MustCompile(`\s-[A-Za-z]\|([A-Za-z])\s`).FindAllStringSubmatch(line, -1) {
			opts = append(opts, "-"+m[1])
		}
	}
	return opts
}

// The -h text of ipvsadm 1.31 does not mention -v/--version nor the short
// form -X of --exact, although both work (reference §13.2, "Note that -v/--version
// and -X are not mentioned in it"; §2.4 "-X is undocumented in -h"). Byte
// compatibility keeps it so; these are the only exceptions.
var notInHelp = []string{"--version", "-v", "-X"}

func TestHelpTextNamesExactlyTheParserOptions(t *testing.T) {
	var want []string
	for _, o := range parserOptions(t) {
		if !slices.Contains(notInHelp, o) {
			want = append(want, o)
		}
	}
	diff(t, "ipvsadm -h", helpOptions(cmdline.Usage("ipvsadm")), want)

	// The table's own flags agree with the exceptions.
	for _, o := range cmdline.OptionTable {
		hidden := !o.Documented
		if hidden != slices.Contains(notInHelp, "--"+o.Long) {
			t.Errorf("--%s: Documented=%v disagrees with the known -h exceptions", o.Long, o.Documented)
		}
		for _, c := range o.Short {
			if (hidden || o.ShortUndocumented) != slices.Contains(notInHelp, "-"+string(c)) {
				t.Errorf("-%c: Documented/ShortUndocumented disagree with the known -h exceptions", c)
			}
		}
	}
}

// commandLine is how a test line starts for command c.
func commandLine(c cmdline.Command) string {
	for _, o := range cmdline.OptionTable {
		if o.Command != c {
			continue
		}
		word := "--" + o.Long
		if o.Short != "" {
			word = "-" + o.Short[:1]
		}
		if o.Arg == cmdline.ArgRequired {
			word += " master"
		}
		return "ipvsadm " + word
	}
	return ""
}

// expectedAfter is what a completion must offer after command c when the
// word being completed starts with '-': the options whose matrix cell for c
// is not Illegal. Options without a matrix bit are decided by their own
// rules: -6 only after -f (withFwmark), and --sort, which ipvsadm accepts
// with every command but which only means something to -L (reference §2.4: "no-op,
// accepted with every command"), only with -L.
func expectedAfter(c cmdline.Command, withFwmark bool) []string {
	var want []string
	for _, o := range cmdline.OptionTable {
		if o.Command != cmdline.NoCommand {
			continue
		}
		var offer bool
		switch {
		case o.Long == "ipv6":
			offer = withFwmark
		case o.Long == "sort":
			offer = c == cmdline.CmdList
		case o.Option == cmdline.OptService && withFwmark:
			offer = false // the service is given
		default:
			offer = cmdline.Allowed(c, o.Option) != cmdline.Illegal
		}
		if offer {
			want = append(want, spellings(o)...)
		}
	}
	return want
}

// TestCompletionsOfferExactlyTheParserOptions drives each shell's
// completion: at the first word it must offer exactly the commands, after
// each command exactly what the matrix allows (and -6 after -f).
func TestCompletionsOfferExactlyTheParserOptions(t *testing.T) {
	var commands []string
	for _, o := range cmdline.OptionTable {
		if o.Command != cmdline.NoCommand {
			commands = append(commands, spellings(o)...)
		}
	}
	checks := []completionCheck{{"ipvsadm -", commands}}
	for c := cmdline.Command(0); int(c) < cmdline.NumMatrixCommands; c++ {
		prefix := commandLine(c)
		if prefix == "" {
			t.Fatalf("no option selects command %s", c.Name())
		}
		checks = append(checks, completionCheck{prefix + " -", expectedAfter(c, false)})
		if cmdline.Allowed(c, cmdline.OptService) != cmdline.Illegal {
			checks = append(checks, completionCheck{prefix + " -f 1 -", expectedAfter(c, true)})
		}
	}
	var union []string
	for _, c := range checks {
		union = append(union, c.want...)
	}
	// Together the checks cover every option of the parser.
	diff(t, "options covered by the completion checks", union, parserOptions(t))

	inEveryShell(t, checks, func(t *testing.T, shell string, c completionCheck, got []string) {
		diff(t, shell+" after "+strings.TrimPrefix(c.line, "ipvsadm "), got, c.want)
	})
}
