// Package testscripts holds lvskit's data-driven command-line tests.
//
// It also holds the code that runs them.
//
// The differential corpus (differential/*.txt) is the main proof that our
// ipvsadm, ipvsadm-save and ipvsadm-restore behave like Debian's ipvsadm
// 1.31: every command line is run once with the reference binaries and once
// with ours, each in its own fresh network namespace of the lab VM, and
// stdout, stderr, exit status and the resulting kernel tables must be
// identical. This file parses the corpus, counts the invocations it makes,
// and normalises what may legitimately differ (documented in
// docs/compatibility.md); differential_lab_test.go runs it in the lab.
package testscripts

import (
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// minInvocations is the size the corpus must keep: the differential proof
// promises at least this many ipvsadm, ipvsadm-save and ipvsadm-restore
// invocations, every one identical to the reference's.
const minInvocations = 600

// lineKind says how the differential runner treats one corpus line.
type lineKind int

const (
	// plain lines may change state: the reference runs in its namespace,
	// ours in its own, and the resulting tables are compared afterwards.
	plain lineKind = iota
	// same lines are read-only: both binaries run in the reference's
	// namespace, so both see the same kernel dump order.
	same
	// timing lines are read-only and print timing-dependent values: run
	// like same, then compared after maskTiming.
	timing
	// setup lines prepare both namespaces; they must exit 0 and their
	// output is not compared.
	setup
	// deliberate lines are the documented differences (docs/compatibility.md):
	// input on which Debian's wrapper scripts silently lose rules (the
	// restore flushes, then restores less) or report success for a save
	// that was not written. Ours must refuse with its message and leave its
	// table unchanged; the reference's results are logged, not compared.
	deliberate
)

var kindPrefixes = map[string]lineKind{"@same": same, "@timing": timing, "@setup": setup, "@deliberate": deliberate}

func (k lineKind) String() string {
	switch k {
	case plain:
		return "plain"
	case same:
		return "@same"
	case timing:
		return "@timing"
	case setup:
		return "@setup"
	case deliberate:
		return "@deliberate"
	}
	return fmt.Sprintf("lineKind(%d)", int(k))
}

// corpusLine is one command of a corpus file.
type corpusLine struct {
	File string // base name of the corpus file
	Num  int    // 1-based line number in the file
	Kind lineKind
	Cmd  string // the shell command, without the kind prefix
}

func (l corpusLine) String() string {
	p := ""
	if l.Kind != plain {
		p = l.Kind.String() + " "
	}
	return fmt.Sprintf("%s:%d: %s%s", l.File, l.Num, p, l.Cmd)
}

// parseCorpus reads one corpus file: one shell command per line, blank lines
// and lines starting with '#' ignored, an optional kind prefix
// (@same, @timing, @setup, @deliberate) followed by a space.
func parseCorpus(name string, r io.Reader) ([]corpusLine, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var lines []corpusLine
	for n, text := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		n++
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.ContainsAny(text, "\r") {
			return nil, fmt.Errorf("%s:%d: carriage return in a corpus line (write \\r inside printf instead)", name, n)
		}
		l := corpusLine{File: name, Num: n, Kind: plain, Cmd: text}
		if strings.HasPrefix(text, "@") {
			word, rest, _ := strings.Cut(text, " ")
			kind, ok := kindPrefixes[word]
			if !ok {
				return nil, fmt.Errorf("%s:%d: unknown line kind %q (want @same, @timing, @setup or @deliberate)", name, n, word)
			}
			l.Kind, l.Cmd = kind, strings.TrimSpace(rest)
			if l.Cmd == "" {
				return nil, fmt.Errorf("%s:%d: %s without a command", name, n, word)
			}
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// compared reports whether the line's results are compared (and its
// invocations counted).
func (l corpusLine) compared() bool { return l.Kind != setup }

// invocationNames are the programs whose invocations the corpus counts.
var invocationNames = map[string]bool{"ipvsadm": true, "ipvsadm-save": true, "ipvsadm-restore": true}

// countInvocations counts the ipvsadm, ipvsadm-save and ipvsadm-restore
// invocations written in a shell command: every simple command whose command
// word (after variable assignments, reserved words and the wrappers exec,
// env and timeout) has one of those base names, by any path. The -c script
// of sh, bash and su is counted recursively. The count is static: a loop body
// counts once, text that is only data (printf input for -R) counts zero.
func countInvocations(cmd string) int { return len(invokedPrograms(cmd)) }

// invokedPrograms returns the command words of the invocations
// countInvocations counts, as written.
func invokedPrograms(cmd string) []string {
	var progs []string
	for _, words := range simpleCommands(cmd) {
		progs = append(progs, invokedBy(words)...)
	}
	return progs
}

func invokedBy(words []string) []string {
	i := 0
	for i < len(words) {
		w := words[i]
		switch {
		case isAssignment(w):
			i++
			continue
		case w == "!" || w == "{" || w == "}" || w == "do" || w == "then" || w == "else" ||
			w == "if" || w == "elif" || w == "while" || w == "until" || w == "exec" || w == "done" || w == "fi":
			i++
			continue
		case w == "env":
			i++
			continue
		case w == "timeout":
			i += 2 // timeout DURATION command...
			continue
		case w == "for" || w == "case":
			return nil // the words up to the next separator are data
		}
		break
	}
	if i >= len(words) {
		return nil
	}
	prog := path.Base(words[i])
	if invocationNames[prog] {
		return []string{words[i]}
	}
	if prog == "sh" || prog == "bash" || prog == "su" {
		for j := i + 1; j+1 < len(words); j++ {
			if words[j] == "-c" {
				return invokedPrograms(words[j+1])
			}
		}
	}
	return nil
}

var assignmentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func isAssignment(w string) bool { return assignmentRE.MatchString(w) }

// simpleCommands splits a shell command into its simple commands, each a
// list of words with quotes removed. It knows the separators ; & | && || (
// ) and newline, single and double quotes and backslash escapes, and that
// redirections such as 2>&1 are not separators. It is a counting aid, not a
// shell: it does not expand anything.
func simpleCommands(cmd string) [][]string {
	var (
		cmds  [][]string
		words []string
		word  strings.Builder
		inW   bool
	)
	endWord := func() {
		if inW {
			words = append(words, word.String())
			word.Reset()
			inW = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
			words = nil
		}
	}
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == '\'':
			inW = true
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				word.WriteString(cmd[i+1:])
				i = len(cmd)
				break
			}
			word.WriteString(cmd[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inW = true
			for i++; i < len(cmd) && cmd[i] != '"'; i++ {
				if cmd[i] == '\\' && i+1 < len(cmd) && strings.IndexByte("\"\\$`", cmd[i+1]) >= 0 {
					i++
				}
				word.WriteByte(cmd[i])
			}
		case c == '\\' && i+1 < len(cmd):
			inW = true
			i++
			word.WriteByte(cmd[i])
		case c == ' ' || c == '\t':
			endWord()
		case c == '&' && i > 0 && (cmd[i-1] == '>' || cmd[i-1] == '<'):
			word.WriteByte(c) // 2>&1, <&3
		case c == ';' || c == '&' || c == '|' || c == '(' || c == ')' || c == '\n' || c == '`':
			endCmd()
		case c == '$' && i+1 < len(cmd) && cmd[i+1] == '(':
			endCmd()
			i++
		default:
			inW = true
			word.WriteByte(c)
		}
	}
	endCmd()
	return cmds
}

// simpleArgv returns the argument vector of a command line that needs no
// shell: plain words of characters that no shell treats specially, separated
// by spaces, not starting with a variable assignment. The runner executes
// such lines directly, which is what sh would do, only cheaper.
func simpleArgv(cmd string) ([]string, bool) {
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		ok := c == ' ' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("-_./:,=+@%", c) >= 0
		if !ok {
			return nil, false
		}
	}
	args := strings.Fields(cmd)
	if len(args) == 0 || strings.Contains(args[0], "=") {
		return nil, false
	}
	return args, true
}

// Masks for @timing lines. Each replaces only a value that depends on when
// the command runs; see docs/compatibility.md.
var (
	// A -c line: protocol, then the expiry countdown "%02d:%02d" (minutes
	// are not capped, so the field can widen).
	expiryRE = regexp.MustCompile(`^(\S+) +\d+:\d\d +`)
	// The five rate columns at the end of a --rate service or destination
	// line (largenum or, for destination CPS/PPS, plain %8llu).
	rateColumnsRE = regexp.MustCompile(`(\s+\d+[KMGT]?){5}$`)
)

const (
	connTitle   = "pro expire state"
	rateTitle   = "Prot LocalAddress:Port                 CPS    InPPS   OutPPS    InBPS   OutBPS"
	rateTitle2  = "  -> RemoteAddress:Port"
	expiryMask  = "##:##"
	rateColMask = " # # # # #"
)

// maskTiming masks the timing-dependent values of ipvsadm output: the
// expiry countdown of the connection lines that follow a -c title, and the
// five rate columns of the lines that follow a --rate title. Everything else
// is returned unchanged.
func maskTiming(out string) string {
	lines := strings.SplitAfter(out, "\n")
	mode := ""
	for i, full := range lines {
		l := strings.TrimSuffix(full, "\n")
		nl := full[len(l):]
		switch {
		case strings.HasPrefix(l, connTitle):
			mode = "conn"
			continue
		case l == rateTitle:
			mode = "rate"
			continue
		}
		switch mode {
		case "conn":
			if m := expiryRE.FindStringSubmatch(l); m != nil {
				lines[i] = m[1] + " " + expiryMask + " " + l[len(m[0]):] + nl
				continue
			}
		case "rate":
			if l == rateTitle2 {
				continue
			}
			if loc := rateColumnsRE.FindStringIndex(l); loc != nil {
				lines[i] = l[:loc[0]] + rateColMask + nl
				continue
			}
		}
		mode = ""
	}
	return strings.Join(lines, "")
}

// snapshot is the normalised kernel state of one namespace.
type snapshot struct {
	Save       string // -S -n lines, sorted
	Timeout    string // -L --timeout
	Daemon     string // -L --daemon
	Thresholds string // -L -n --thresholds: titles, then service blocks sorted, connection counts cut
	Stderr     string
	Code       int
}

// parseSnapshot splits and normalises the output of the snapshot restore.
// Services come out of the kernel in hash order, and the hash mixes in a
// per-namespace pointer, so the same table dumps in a different order in
// the two namespaces (and ipvsadm's non-transitive sort does not always
// undo that). Save lines are therefore compared as a sorted set — each
// carries its service, so nothing is lost — and listing lines as sorted
// blocks of a service line with its destination lines (whose order does not
// depend on the hash). The ActiveConn and InActConn columns are cut from the
// thresholds listing: connection counts move with connection expiry, which
// runs on each namespace's own clock; the commands' own listings compare
// them.
func parseSnapshot(stdout, stderr string, code int) snapshot {
	var save, timeout, daemon, head []string
	var blocks []string
	for _, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		switch {
		case l == "":
		case strings.HasPrefix(l, "-A ") || strings.HasPrefix(l, "-a "):
			save = append(save, l)
		case strings.HasPrefix(l, "Timeout (tcp tcpfin udp): "):
			timeout = append(timeout, l)
		case strings.Contains(l, " sync daemon (mcast="):
			daemon = append(daemon, l)
		case strings.HasPrefix(l, "IP Virtual Server version") || strings.HasPrefix(l, "Prot ") || l == rateTitle2:
			head = append(head, l)
		case strings.HasPrefix(l, "  -> "):
			f := strings.Fields(l)
			if len(f) > 4 {
				f = f[:4]
			}
			d := strings.Join(f, " ")
			if len(blocks) == 0 {
				blocks = append(blocks, "")
			}
			blocks[len(blocks)-1] += "\n" + d
		default:
			blocks = append(blocks, l)
		}
	}
	sort.Strings(save)
	sort.Strings(blocks)
	join := func(ls []string) string {
		if len(ls) == 0 {
			return ""
		}
		return strings.Join(ls, "\n") + "\n"
	}
	return snapshot{
		Save:       join(save),
		Timeout:    join(timeout),
		Daemon:     join(daemon),
		Thresholds: join(append(head, blocks...)),
		Stderr:     stderr,
		Code:       code,
	}
}

// diffSnapshots describes how two snapshots differ, or returns "".
func diffSnapshots(ref, ours snapshot) string {
	var b strings.Builder
	part := func(name, r, o string) {
		if r != o {
			fmt.Fprintf(&b, "  %s (-reference namespace +ours):\n%s", name, lineDiff(r, o))
		}
	}
	part("ipvsadm -S -n, sorted", ref.Save, ours.Save)
	part("ipvsadm -L --timeout", ref.Timeout, ours.Timeout)
	part("ipvsadm -L --daemon", ref.Daemon, ours.Daemon)
	part("ipvsadm -L -n --thresholds, blocks sorted, connection counts cut", ref.Thresholds, ours.Thresholds)
	part("snapshot stderr", ref.Stderr, ours.Stderr)
	if ref.Code != ours.Code {
		fmt.Fprintf(&b, "  snapshot exit status: reference namespace %d, ours %d\n", ref.Code, ours.Code)
	}
	return b.String()
}

// lineDiff is a line diff of want (reference, "-") and got (ours, "+"),
// each line quoted so that trailing spaces and control bytes show. Common
// lines are shown with two spaces of indent; long runs of them are elided.
func lineDiff(want, got string) string {
	a := splitLines(want)
	b := splitLines(got)
	// Longest common subsequence, fine for command output sizes.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i]})
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', a[i]})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j]})
			j++
		}
	}
	// Show changes with two lines of context; elide the rest.
	const context = 2
	show := make([]bool, len(ops))
	for k, o := range ops {
		if o.tag != ' ' {
			for d := max(0, k-context); d <= min(len(ops)-1, k+context); d++ {
				show[d] = true
			}
		}
	}
	var out strings.Builder
	for k, o := range ops {
		if !show[k] {
			if k == 0 || show[k-1] {
				out.WriteString("    ...\n")
			}
			continue
		}
		fmt.Fprintf(&out, "   %c%s\n", o.tag, strconv.Quote(o.text))
	}
	return out.String()
}

// diffOp is one line of a line diff: ' ' common, '-' reference only, '+'
// ours only.
type diffOp struct {
	tag  byte
	text string
}

// splitLines splits output into lines; a missing final newline shows as a
// last line ending in "\\ no newline".
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	for i, l := range ls {
		if strings.HasSuffix(l, "\n") {
			ls[i] = l[:len(l)-1]
		} else {
			ls[i] = l + " \\ no newline at end"
		}
	}
	return ls
}
