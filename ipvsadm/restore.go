package ipvsadm

import (
	"bufio"
	"bytes"
	"io"

	"github.com/lvskit/lvskit/ipvsadm/cmdline"
)

// This file holds the simple restore (-R): ipvsadm 1.31's tokenizer and one
// Exec per line, in order. The pipelined engine (pipelined.go), which
// ipvsadm runs, reuses the tokenizer, Parse, Execute, Invocation.RequestIn
// and kernelErrorOutcome, so both engines print and exit alike; an Env
// chooses one through RestoreEngine.

// RestoreEngine runs a restore for program p: it reads p.Stdin, runs each
// line (argv[0] = prog) and returns the restore's outcome, whose messages
// are already printed. The rules are those of ipvsadm 1.31: lines run in
// order; an outcome that Terminates stops the restore with that outcome;
// otherwise the restore's outcome is that of the last line run (success
// for no lines).
type RestoreEngine func(p *Program, prog string) cmdline.Outcome

// RestoreSequential is the plain restore engine: one kernel round trip per
// line.
func RestoreSequential(p *Program, prog string) cmdline.Outcome {
	lines := NewRestoreReader(p.Stdin)
	last := cmdline.Outcome{Kind: cmdline.Success}
	for {
		argv, ok := lines.Next(prog)
		if !ok {
			return last
		}
		if len(argv) < 2 {
			continue
		}
		o := p.RunLine(argv)
		last = cmdline.Outcome{Kind: o.Kind}
		if o.Terminates() {
			return last
		}
	}
}

// restoreTokenMax is the longest token ipvsadm's fscanf reads at once;
// longer runs are split into several tokens.
const restoreTokenMax = 4096

// RestoreReader splits restore input into command lines the way ipvsadm
// 1.31's config_stream_read does: tokens are runs of bytes other than
// space, tab, CR and LF, cut into pieces of restoreTokenMax bytes, each
// ending at its first NUL byte (C strings); a LF ends a line; tokens equal
// to "ipvsadm" are dropped; there is no quoting and no comment syntax. At
// the end of input, a last line without LF is kept if at most one white
// space byte follows its final token, and silently dropped otherwise.
//
// It reads a line at a time from a large buffer and hands out tokens as
// slices of that buffer, so a restore does not allocate per line.
type RestoreReader struct {
	r      *bufio.Reader
	long   []byte // a line longer than the buffer, gathered
	line   []byte // the last line read, without its LF (valid as fields)
	fields [][]byte
	ended  bool
}

// NextLike reads the next line with the first of tmpls that matches it
// (see LineTemplate.Match) and returns its invocation; the line is then
// consumed. Otherwise nothing is read.
func (t *RestoreReader) NextLike(tmpls ...*cmdline.LineTemplate) (*cmdline.Invocation, bool) {
	if t.ended {
		return nil, false
	}
	var buf []byte
	for _, tmpl := range tmpls {
		if !tmpl.Ready() {
			continue
		}
		if buf == nil {
			buf, _ = t.r.Peek(cmdline.TemplateWindow)
		}
		if n, inv, _, ok := tmpl.Match(buf); ok {
			t.r.Discard(n + 1)
			return inv, true
		}
	}
	return nil, false
}

// Line is the last line NextFields read, without its LF; its fields are
// slices of it. Valid until the next call.
func (t *RestoreReader) Line() []byte { return t.line }

// NewRestoreReader reads restore input from r.
func NewRestoreReader(r io.Reader) *RestoreReader {
	return &RestoreReader{r: bufio.NewReaderSize(r, 64<<10)}
}

func isRestoreSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Next returns the next line as an argument vector starting with prog, and
// false at the end of input. A line without tokens gives just {prog}.
func (t *RestoreReader) Next(prog string) ([]string, bool) {
	fields, ok := t.NextFields()
	if !ok {
		return nil, false
	}
	return cmdline.RestoreArgv(prog, fields), true
}

// NextFields returns the tokens of the next line (none for an empty line),
// and false at the end of input. The slices are valid until the next call.
func (t *RestoreReader) NextFields() ([][]byte, bool) {
	if t.ended {
		return nil, false
	}
	line, err := t.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		t.long = append(t.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = t.r.ReadSlice('\n')
			t.long = append(t.long, line...)
		}
		line = t.long
	}
	if err == nil {
		t.line = line[:len(line)-1]
		t.split(t.line)
		return t.fields, true
	}
	// The end of input (ipvsadm treats a read error alike): a last line
	// without LF. fscanf consumes one white-space byte after a token; a
	// second one sends config_stream_read to skip blanks, where the end
	// of input discards the line.
	t.ended = true
	t.line = line
	t.split(line)
	trailing := 0
	for trailing < len(line) && isRestoreSpace(line[len(line)-1-trailing]) {
		trailing++
	}
	if len(t.fields) == 0 || trailing > 1 {
		return nil, false
	}
	return t.fields, true
}

// split cuts one line (without its LF) into tokens.
func (t *RestoreReader) split(line []byte) {
	t.fields = t.fields[:0]
	for i := 0; i < len(line); {
		if isRestoreSpace(line[i]) {
			i++
			continue
		}
		start, nul := i, false
		for ; i < len(line); i++ {
			// White space and NUL are all below '!': one comparison
			// for the usual byte.
			if c := line[i]; c <= ' ' {
				if isRestoreSpace(c) {
					break
				}
				nul = nul || c == 0
			}
		}
		for run := line[start:i]; len(run) > 0; {
			token := run[:min(len(run), restoreTokenMax)]
			run = run[len(token):]
			if nul {
				if n := bytes.IndexByte(token, 0); n >= 0 {
					token = token[:n]
				}
			}
			if string(token) != "ipvsadm" {
				t.fields = append(t.fields, token)
			}
		}
	}
}
