package wrappers

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
)

// problem is a reason not to restore some input: Debian's
// ipvsadm-restore script would flush the table and then restore less than
// the input holds (or nothing), silently or with a status that only tells
// about the last line.
type problem struct {
	Line int    // line number in the input, from 1; 0 for the whole input
	Text string // what is wrong, one line
}

func (p problem) String() string {
	if p.Line == 0 {
		return p.Text
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.Text)
}

// maxProblems bounds what check reports: enough to fix a file, not a
// flood for a binary one.
const maxProblems = 10

// check looks at restore input as the wrapper script would use it (lines
// starting with '#' dropped) and reports what would make the restore
// destroy rules: a NUL byte (grep then passes nothing on), a line that is
// not valid UTF-8 when utf8 is set (grep drops it), and a line that
// ipvsadm's own parser rejects (ipvsadm -R stops there, or skips it), or
// that is a nested -R. Lines are parsed by p, without a kernel; host
// names are resolved by p's resolver.
func check(data []byte, utf8 bool, p *cmdline.Parser) checkResult {
	var c checkResult
	problems := &c.Problems
	count := 0
	report := func(line int, format string, args ...any) {
		count++
		if len(*problems) < maxProblems {
			*problems = append(*problems, problem{line, fmt.Sprintf(format, args...)})
		}
	}
	var inv cmdline.Invocation
	// ipvsadm's tokenizer, over the same lines (all of them ending in a
	// newline, so none is dropped at the end of input).
	var src io.Reader = bytes.NewReader(data)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		src = io.MultiReader(src, strings.NewReader("\n"))
	}
	tokens := ipvsadm.NewRestoreReader(src)
	n := 0
	for rest := data; len(rest) > 0; {
		var line []byte
		line, rest = cutLine(rest)
		n++
		fields, _ := tokens.NextFields()
		if i := bytes.IndexByte(line, 0); i >= 0 {
			report(n, "holds a NUL byte (column %d): this is not a rules file", i+1)
			continue
		}
		if len(line) > 0 && line[0] == '#' {
			continue
		}
		c.Lines = append(c.Lines, int32(n))
		if len(fields) > 0 {
			c.Last = len(c.Lines)
		}
		if utf8 && !validUTF8(line) {
			report(n, "is not valid UTF-8 (the locale's character set), so grep would drop it")
			continue
		}
		if len(fields) == 0 || cmdline.ParseFast(fields, &inv) {
			continue
		}
		parsed, ended := p.Parse(cmdline.RestoreArgv(ipvsadmName, fields))
		switch {
		case ended != nil && ended.Kind == cmdline.TryHelp:
			report(n, "does not parse: it does not start with an ipvsadm command option")
		case ended != nil && ended.Kind != cmdline.Informational:
			report(n, "does not parse: %s", firstLine(ended.Stderr, "ipvsadm rejects it"))
		case ended == nil && parsed.Command == cmdline.CmdRestore:
			report(n, "is a nested restore (-R), which ipvsadm refuses")
		case ended == nil && (parsed.Command == cmdline.CmdStartDaemon || parsed.Command == cmdline.CmdStopDaemon):
			c.Daemons = append(c.Daemons, len(c.Lines))
		}
	}
	if count > len(*problems) {
		*problems = append(*problems, problem{0, fmt.Sprintf("and %d more lines like these", count-len(*problems))})
	}
	return c
}

// checkResult is what check found.
type checkResult struct {
	// Problems is empty when the input can be restored.
	Problems []problem
	// Lines holds the input line number of each line ipvsadm -R will
	// read, in order (every line not starting with '#').
	Lines []int32
	// Last is how many of those lines -R must read to have run every line
	// that holds a command.
	Last int
	// Daemons holds which of those lines (counted from 1, as Last) start
	// or stop a sync daemon, in order.
	Daemons []int
}

// InputLine is the input line number of the n-th line -R reads (from 1).
func (c *checkResult) InputLine(n int) int {
	if n < 1 || n > len(c.Lines) {
		return n
	}
	return int(c.Lines[n-1])
}

// firstLine is the first non-empty line of s, or def, cut to 200 bytes
// (ipvsadm quotes arguments of up to 4,096 bytes).
func firstLine(s, def string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 200 {
				l = l[:200] + "..."
			}
			return l
		}
	}
	return def
}
