// Package wrappers is Debian's ipvsadm-save and ipvsadm-restore scripts.
//
// The ipvsadm package ships them beside the binary. SaveMain and RestoreMain
// behave like the bash scripts, running ipvsadm in-process, except where a
// script would lose a rule set (docs/compatibility.md lists those
// differences). RestoreMain reads a restore's whole input with ipvsadm's
// parser and tries it in a scratch table, before the real table is
// flushed.
package wrappers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
)

// The wrapper scripts call ipvsadm through PATH, so its messages name it
// "ipvsadm" whatever the wrapper was invoked as.
const ipvsadmName = "ipvsadm"

// SaveMain behaves like Debian's ipvsadm-save script (args[0] is the
// name it was invoked as): every argument is looked at; "-n" asks for
// numeric output, any other argument starting with "-" prints the script's
// usage to stderr and exits 1, other arguments are ignored. Then it runs
// "ipvsadm -S [-n]" in-process and returns that run's status. It reads
// no input (stdin is there for the shape every command's entry has).
//
// Two deliberate differences keep a save from lying:
//   - the kernel resumes a dump by position, so a table that changes
//     while it is read can come out with services skipped or repeated:
//     the table is read until two reads in a row agree (bytes, messages
//     and status), at most savePasses times; if none agree, nothing is
//     written and the status is 1;
//   - an error writing stdout (a full disk) is reported and makes the
//     status 1, where the script's ipvsadm would exit 0.
func SaveMain(args []string, stdin io.Reader, stdout, stderr io.Writer, env ipvsadm.Env) int {
	argv := []string{ipvsadmName, "-S"}
	numeric := false
	for _, a := range args[1:] {
		switch {
		case a == "-n":
			numeric = true
		case strings.HasPrefix(a, "-"):
			io.WriteString(stderr, scriptName(args[0])+": Script to save the IPVS table to stdout.\n"+
				"   With the -n option, prints out the table in numeric format.\n")
			return 1
		}
	}
	if numeric {
		argv = append(argv, "-n")
	}
	var prev *saveRun
	for range savePasses {
		rec := &saveRun{}
		rec.status = ipvsadm.Main(argv, nil, saveStream{rec, false}, saveStream{rec, true}, env)
		// A run that printed no table (the kernel interface could not be
		// opened) is not read again: the module loader would run twice.
		if rec.status != 0 && !rec.wroteStdout() || prev != nil && rec.equal(prev) {
			if err := rec.replay(stdout, stderr); err != nil {
				fmt.Fprintf(stderr, "%s: writing standard output: %s\n", scriptName(args[0]), errorText(err))
				return 1
			}
			return rec.status
		}
		prev = rec
	}
	fmt.Fprintf(stderr, "%s: the IPVS table changed during each of %d reads; nothing written\n", scriptName(args[0]), savePasses)
	return 1
}

// savePasses bounds how often SaveMain reads a changing table.
const savePasses = 10

// saveRun is what one ipvsadm run wrote, write by write, so that it can
// be compared with another run and then written out the same way.
type saveRun struct {
	writes []saveWrite
	status int
}

type saveWrite struct {
	stderr bool
	b      []byte
}

func (r *saveRun) wroteStdout() bool {
	for _, w := range r.writes {
		if !w.stderr && len(w.b) > 0 {
			return true
		}
	}
	return false
}

func (r *saveRun) equal(o *saveRun) bool {
	return r.status == o.status && slices.EqualFunc(r.writes, o.writes, func(a, b saveWrite) bool {
		return a.stderr == b.stderr && bytes.Equal(a.b, b.b)
	})
}

// replay writes the saveWrite output in its order. It stops writing stdout
// at the first error and returns that error.
func (r *saveRun) replay(stdout, stderr io.Writer) error {
	var err error
	for _, w := range r.writes {
		switch {
		case w.stderr:
			stderr.Write(w.b)
		case err == nil:
			_, err = stdout.Write(w.b)
		}
	}
	return err
}

// saveStream is one stream of a saveRun.
type saveStream struct {
	r      *saveRun
	stderr bool
}

func (w saveStream) Write(b []byte) (int, error) {
	w.r.writes = append(w.r.writes, saveWrite{w.stderr, bytes.Clone(b)})
	return len(b), nil
}

// scriptName is what the script's `basename $0` prints in its usage line.
// The unquoted expansion is split into words by the shell and echo joins
// them again with single spaces; only the usual one-word case is
// reproduced with basename's rules (trailing slashes dropped, "/" kept).
func scriptName(arg0 string) string {
	name := strings.TrimRight(arg0, "/")
	if name == "" {
		if arg0 != "" {
			return "/"
		}
		return ""
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// RestoreEnv is what the ipvsadm-restore wrapper needs besides its
// arguments and streams. The wrapper (RestoreMain) behaves like
// Debian's ipvsadm-restore script: arguments are ignored; all of stdin is
// read through `grep -v '^#'` (lines starting with '#' dropped) into a
// shell variable, then "ipvsadm -C" flushes the table, then `echo "$INPUT"
// | ipvsadm -R` restores what was read. Both ipvsadm runs happen
// in-process with Env.
//
// The input is read completely before the flush, as the script does, so
// that `ipvsadm-save | ipvsadm-restore` saves the whole table before it is
// flushed. Like the script's variable, it is held in memory.
//
// Where Debian's script would flush the table and then restore less than
// the input, it refuses before flushing, names the lines and exits 1:
//   - a read error on stdin, a NUL byte, a line grep would drop as not
//     UTF-8, a line ipvsadm cannot parse (see check);
//   - a line the kernel refuses, or a restore that ends before the last
//     line (-h, -v, a failed listing): the input is first restored into
//     an empty table of its own (Scratch), and the real table is flushed
//     only if every line succeeded there.
//
// A line that still fails in the real table makes the status 1 too,
// naming the lines. Every other input gets the script's output and
// status, byte for byte.
type RestoreEnv struct {
	ipvsadm.Env
	// Scratch opens IPVS in an empty table nothing else uses, where the
	// input is tried first (the real command: a new network namespace,
	// ipvs.OpenScratch). Sync daemon lines are left out of the trial: they
	// depend on the host's interfaces and daemons, not on the input. If
	// Scratch is nil or fails while the real table can be opened, Run
	// refuses the input.
	Scratch func() (ipvs.Client, error)
	// Getenv reads the environment: the locale (LC_ALL, LC_CTYPE, LANG)
	// decides what grep takes for text; LVSKIT_RESTORE_CHECK=1 stops after
	// the check (nothing changes; status 0 or 1); LVSKIT_RESTORE_PROOF=off
	// restores without the trial in Scratch. LVSKIT_RESTORE_STRICT=1 is
	// accepted: what it asked for is the default.
	Getenv func(string) string
	// Interrupt, if not nil, delivers SIGINT or SIGTERM. Before the flush
	// it ends the run with nothing changed; during the restore, the
	// restore ends once the lines already sent are answered. Either way
	// the run reports how far it got and returns 128 + the signal number.
	Interrupt <-chan os.Signal
}

// restoreRun is one run of the wrapper: its arguments, streams and
// environment.
type restoreRun struct {
	Args           []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	RestoreEnv
}

// RestoreMain runs the ipvsadm-restore wrapper (args[0] is the name it was
// invoked as) and returns its exit status.
func RestoreMain(args []string, stdin io.Reader, stdout, stderr io.Writer, env RestoreEnv) int {
	return restoreRun{Args: args, Stdin: stdin, Stdout: stdout, Stderr: stderr, RestoreEnv: env}.run()
}

// signalStatus is the status a shell reports for a process that signal s
// ended: 128 plus its number.
func signalStatus(s os.Signal) int {
	n := 0
	if sig, ok := s.(syscall.Signal); ok {
		n = int(sig)
	}
	return 128 + n
}

// statusRefused is the wrapper's status when it refuses input or reports
// a restore that did not do what the input asked.
const statusRefused = 1

func (r restoreRun) run() int {
	name := "ipvsadm-restore"
	if len(r.Args) > 0 {
		name = scriptName(r.Args[0])
	}
	say := func(format string, args ...any) {
		fmt.Fprintf(r.Stderr, name+": "+format+"\n", args...)
	}
	pr := &ipvsadm.Progress{Interrupt: r.Interrupt}

	data, long, err := readInput(r.Stdin)
	if err != nil {
		// Debian's grep would report the error and the script would
		// flush the table and restore the lines read before it.
		say("reading standard input: %s; the IPVS table was not changed", errorText(err))
		return statusRefused
	}
	if long > 0 {
		say("line %d: is longer than %d MiB: this is not a rules file", long, maxLineLength>>20)
		say("input refused; the IPVS table was not changed")
		return statusRefused
	}
	utf8 := utf8Locale(r.Getenv)
	checked := check(data, utf8, &cmdline.Parser{Resolver: r.Env.Resolver, Posix: r.Env.Posix})
	if len(checked.Problems) > 0 {
		for _, p := range checked.Problems {
			say("%s", p)
		}
		say("input refused; the IPVS table was not changed")
		return statusRefused
	}
	if r.Getenv("LVSKIT_RESTORE_CHECK") == "1" {
		return 0
	}
	// Before the flush a signal ends the run with nothing changed; from
	// here on the restore polls the channel at every line.
	if r.Interrupt != nil {
		select {
		case s := <-r.Interrupt:
			say("interrupted before the table was changed")
			return signalStatus(s)
		default:
		}
	}
	kept, warning := grepComments(data, utf8)
	input := bytes.TrimRight(kept, "\n")
	if r.Getenv("LVSKIT_RESTORE_PROOF") != "off" {
		if status, done := r.try(input, &checked, say); done {
			return status
		}
	}
	io.WriteString(r.Stderr, warning)
	env := r.Env
	env.RestoreEngine = ipvsadm.Tracked(ipvsadm.DefaultWindow, pr)
	opened := false
	env.Open = func() (ipvs.Client, error) {
		c, err := r.Env.Open()
		opened = err == nil
		return c, err
	}
	ipvsadm.Main([]string{ipvsadmName, "-C"}, nil, r.Stdout, r.Stderr, env)
	status := ipvsadm.Main([]string{ipvsadmName, "-R"}, echo(input), r.Stdout, r.Stderr, env)
	if pr.Caught != nil {
		if pr.Read == 0 {
			say("interrupted after the table was flushed, before any line was restored")
		} else {
			say("interrupted: the table holds what input lines up to %d restored; later lines were not restored", checked.InputLine(pr.Read))
		}
		return signalStatus(pr.Caught)
	}
	if !opened {
		// IPVS could not be opened (not root, no IPVS): nothing changed,
		// and ipvsadm said so as Debian's script does.
		return status
	}
	failed := false
	if pr.Failures > 0 {
		say("%s; the table does not hold what they ask for", failedLines(pr, &checked))
		failed = true
	}
	if pr.Read < checked.Last {
		say("the restore ended at input line %d; later lines were not restored", checked.InputLine(pr.Read))
		failed = true
	}
	if failed {
		return statusRefused
	}
	return status
}

// try restores input into a table of its own (r.Scratch) before the real
// one is touched. It reports done, with the run's status, when the input
// must not be restored: a line failed there, the restore would end early,
// a signal came, or no scratch table could be had while the real table
// can be changed.
func (r restoreRun) try(input []byte, checked *checkResult, say func(string, ...any)) (status int, done bool) {
	client, err := r.openScratch()
	if err != nil {
		if !r.tableOpens() {
			// Nothing this run could change (not root, no IPVS): the
			// restore fails as Debian's script does.
			return 0, false
		}
		say("cannot try the input first: %v", err)
		say("the IPVS table was not changed (LVSKIT_RESTORE_PROOF=off restores without the trial)")
		return statusRefused, true
	}
	pr := &ipvsadm.Progress{Interrupt: r.Interrupt}
	env := r.Env
	env.Open = func() (ipvs.Client, error) { return scratchTable{client}, nil }
	env.Modprobe = nil
	env.RestoreEngine = ipvsadm.Tracked(ipvsadm.DefaultWindow, pr)
	var msgs bytes.Buffer
	ipvsadm.Main([]string{ipvsadmName, "-R"}, echo(blankLines(input, checked.Daemons)), io.Discard, &msgs, env)
	if pr.Caught != nil {
		say("interrupted before the table was changed")
		return signalStatus(pr.Caught), true
	}
	ended := pr.Read < checked.Last
	if pr.Failures == 0 && !ended {
		return 0, false
	}
	// ipvsadm's own messages for the lines, then which lines they were.
	r.Stderr.Write(msgs.Bytes())
	if pr.Failures > 0 {
		say("%s in a trial restore into an empty scratch network namespace", failedLines(pr, checked))
	}
	if ended {
		say("a trial restore into an empty scratch network namespace ended at input line %d; later lines would not be restored", checked.InputLine(pr.Read))
	}
	say("input refused; the IPVS table was not changed")
	return statusRefused, true
}

// openScratch opens the scratch table, loading the IPVS module once if
// IPVS did not answer there, as ipvsadm does at start-up.
func (r restoreRun) openScratch() (ipvs.Client, error) {
	if r.Scratch == nil {
		return nil, errors.New("no scratch table to try the input in")
	}
	c, err := r.Scratch()
	var opErr *ipvs.OpError
	if err != nil && errors.As(err, &opErr) && r.Env.Modprobe != nil && r.Env.Modprobe() == nil {
		c, err = r.Scratch()
	}
	return c, err
}

// tableOpens reports whether the real table can be opened, and so changed.
func (r restoreRun) tableOpens() bool {
	c, err := r.Env.Open()
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.Info()
	return err == nil
}

// scratchTable empties the scratch table when the trial closes it: its
// memory is then freed at once, not when the kernel gets round to
// dismantling the namespace, and the real restore that follows does not
// need room for two copies of the table.
type scratchTable struct{ ipvs.Client }

func (s scratchTable) Close() error {
	return errors.Join(s.Exec(ipvs.Request{Cmd: ipvs.CmdFlush}), s.Client.Close())
}

// failedLines is "N lines failed (input lines a, b, ...)" for pr.
func failedLines(pr *ipvsadm.Progress, checked *checkResult) string {
	lines := make([]string, len(pr.Failed))
	for i, n := range pr.Failed {
		lines[i] = strconv.Itoa(checked.InputLine(n))
	}
	more := ""
	if pr.Failures > len(pr.Failed) {
		more = fmt.Sprintf(" and %d more", pr.Failures-len(pr.Failed))
	}
	if pr.Failures == 1 {
		return fmt.Sprintf("1 line failed (input line %s)", lines[0])
	}
	return fmt.Sprintf("%d lines failed (input lines %s%s)", pr.Failures, strings.Join(lines, ", "), more)
}

// blankLines is input with the given lines (numbered from 1) made empty,
// so that every other line keeps its number.
func blankLines(input []byte, lines []int) []byte {
	if len(lines) == 0 {
		return input
	}
	out := make([]byte, 0, len(input))
	next := 0
	for n, rest := 1, input; ; n++ {
		line, after, found := bytes.Cut(rest, []byte{'\n'})
		if next < len(lines) && lines[next] == n {
			next++
		} else {
			out = append(out, line...)
		}
		if !found {
			return out
		}
		out = append(out, '\n')
		rest = after
	}
}

// maxLineLength bounds one input line, and so the memory a restore can be
// made to use beyond the input's ordinary lines: ipvsadm's longest valid
// line is a few dozen tokens of at most 4,096 bytes.
const maxLineLength = 1 << 20

// readInput reads all of r, like the script's $(grep ...), but stops at
// the first line longer than maxLineLength and returns its number.
func readInput(r io.Reader) (data []byte, long int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	line, length := 1, 0
	for {
		chunk, err := br.ReadSlice('\n')
		data = append(data, chunk...)
		length += len(chunk)
		if length > maxLineLength {
			return nil, line, nil
		}
		switch {
		case err == bufio.ErrBufferFull:
		case err == io.EOF:
			return data, 0, nil
		case err != nil:
			return nil, 0, err
		default:
			line++
			length = 0
		}
	}
}

// errorText is err as the C library's strerror words it, when err carries
// an errno: Go spells the same texts without the capital letter.
func errorText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return err.Error()
}

// binaryMatches is GNU grep's notice that it suppressed output because the
// input is not text.
const binaryMatches = "grep: (standard input): binary file matches\n"

// grepComments is `grep -v '^#'` on data: the lines not starting with '#',
// each ending in a newline. It reuses data's storage. The second result is
// the notice grep prints on stderr when it takes the input for binary data:
//
//   - a NUL byte: grep prints no line at all (exact when the NUL lies in the
//     first 96 KiB grep reads, the only case reproduced) and gives the
//     notice if some line is selected, counting NUL as a line end too;
//   - in a UTF-8 locale, a line that is not valid UTF-8 for the C library:
//     that line is not printed, the others are, and the notice follows.
func grepComments(data []byte, utf8 bool) (kept []byte, warning string) {
	if bytes.IndexByte(data, 0) >= 0 {
		for rest := data; len(rest) > 0; {
			end := bytes.IndexAny(rest, "\n\x00")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 || rest[0] != '#' {
				return nil, binaryMatches
			}
			rest = rest[min(end+1, len(rest)):]
		}
		return nil, ""
	}
	out := data[:0] // never ahead of the line being read, except the last newline
	for rest := data; len(rest) > 0; {
		var line []byte
		line, rest = cutLine(rest)
		switch {
		case len(line) > 0 && line[0] == '#':
		case utf8 && !validUTF8(line):
			warning = binaryMatches
		default:
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out, warning
}

// cutLine splits off the first line of data, without its newline.
func cutLine(data []byte) (line, rest []byte) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return data[:i], data[i+1:]
	}
	return data, nil
}

// echo is what bash's builtin `echo "$INPUT"` writes: the text and a
// newline, unless the whole text is a valid option word (-n, -e, -E or any
// mix like -nE), which echo takes as options and does not print.
func echo(text []byte) io.Reader {
	if len(text) >= 2 && text[0] == '-' && len(bytes.Trim(text[1:], "neE")) == 0 {
		if bytes.IndexByte(text, 'n') >= 0 {
			return strings.NewReader("")
		}
		return strings.NewReader("\n")
	}
	return io.MultiReader(bytes.NewReader(text), strings.NewReader("\n"))
}

// utf8Locale reports whether the C library's character type locale, as
// LC_ALL, LC_CTYPE and LANG select it, uses UTF-8. (A named locale that is
// not installed would really fall back to "C"; that is not checked.)
func utf8Locale(getenv func(string) string) bool {
	name := ""
	for _, v := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if name = getenv(v); name != "" {
			break
		}
	}
	codeset := name
	if i := strings.IndexByte(codeset, '.'); i >= 0 {
		codeset = codeset[i+1:]
	} else {
		return false
	}
	if i := strings.IndexByte(codeset, '@'); i >= 0 {
		codeset = codeset[:i]
	}
	codeset = strings.ToLower(codeset)
	return codeset == "utf-8" || codeset == "utf8"
}

// validUTF8 is the C library's UTF-8 check: sequences of up to six bytes
// (values up to 0x7fffffff), no overlong forms, no surrogates.
func validUTF8(b []byte) bool {
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			i++
			continue
		}
		var n int
		var v, least uint32
		switch {
		case c >= 0xc2 && c <= 0xdf:
			n, v, least = 2, uint32(c&0x1f), 0x80
		case c >= 0xe0 && c <= 0xef:
			n, v, least = 3, uint32(c&0x0f), 0x800
		case c >= 0xf0 && c <= 0xf7:
			n, v, least = 4, uint32(c&0x07), 0x10000
		case c >= 0xf8 && c <= 0xfb:
			n, v, least = 5, uint32(c&0x03), 0x200000
		case c >= 0xfc && c <= 0xfd:
			n, v, least = 6, uint32(c&0x01), 0x4000000
		default:
			return false
		}
		if i+n > len(b) {
			return false
		}
		for _, cc := range b[i+1 : i+n] {
			if cc&0xc0 != 0x80 {
				return false
			}
			v = v<<6 | uint32(cc&0x3f)
		}
		if v < least || v >= 0xd800 && v <= 0xdfff {
			return false
		}
		i += n
	}
	return true
}
