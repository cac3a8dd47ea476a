package ipvsadm

import (
	"bufio"
	"io"
	"strings"
)

// This file holds the simple restore (-R): ipvsadm 1.31's tokenizer and one
// Exec per line, in order. Package rules provides the pipelined engine; it
// plugs in through Program.RestoreEngine and reuses Parse, Execute,
// Invocation.Request and KernelErrorOutcome, so both engines print and
// exit alike.

// RestoreEngine runs a restore for program p: it reads p.Stdin, runs each
// line (argv[0] = prog) and returns the restore's outcome, whose messages
// are already printed. The rules are those of ipvsadm 1.31: lines run in
// order; an outcome that Terminates stops the restore with that outcome;
// otherwise the restore's outcome is that of the last line run (success
// for no lines).
type RestoreEngine func(p *Program, prog string) Outcome

// RestoreSequential is the plain restore engine: one kernel round trip per
// line.
func RestoreSequential(p *Program, prog string) Outcome {
	lines := NewRestoreReader(p.Stdin)
	last := Outcome{Kind: Success}
	for {
		argv, ok := lines.Next(prog)
		if !ok {
			return last
		}
		if len(argv) < 2 {
			continue
		}
		o := p.RunLine(argv)
		last = Outcome{Kind: o.Kind}
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
// space, tab, CR and LF; a LF ends a line; tokens equal to "ipvsadm" are
// dropped; there is no quoting and no comment syntax. At the end of input,
// a last line is kept if its final token is directly followed by the end,
// and silently dropped if white space comes between.
type RestoreReader struct {
	r *bufio.Reader
}

// NewRestoreReader reads restore input from r.
func NewRestoreReader(r io.Reader) *RestoreReader {
	return &RestoreReader{r: bufio.NewReader(r)}
}

func isRestoreSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Next returns the next line as an argument vector starting with prog, and
// false at the end of input. A line without tokens gives just {prog}.
func (t *RestoreReader) Next(prog string) ([]string, bool) {
	argv := []string{prog}
	tokens := 0
	for {
		token, err := t.readToken()
		if err != nil && token == "" {
			// End of input before anything of this line.
			if tokens == 0 {
				return nil, false
			}
			return argv, true
		}
		if token == "" {
			// The line continues with white space: skip it up to the
			// next token or the end of the line. Reaching the end of
			// input here drops the line.
			for {
				c, err := t.r.ReadByte()
				if err != nil {
					return nil, false
				}
				if c == '\n' {
					return argv, true
				}
				if c != ' ' && c != '\t' && c != '\r' {
					_ = t.r.UnreadByte()
					break
				}
			}
			continue
		}
		// C strings end at the first NUL byte.
		if i := strings.IndexByte(token, 0); i >= 0 {
			token = token[:i]
		}
		if token != "ipvsadm" {
			tokens++
			argv = append(argv, token)
		}
		// One white-space byte after the token is consumed with it.
		c, err := t.r.ReadByte()
		if err != nil {
			continue // next readToken reports the end
		}
		if !isRestoreSpace(c) {
			_ = t.r.UnreadByte() // a token longer than restoreTokenMax goes on
			continue
		}
		if c == '\n' {
			return argv, true
		}
	}
}

// readToken reads up to restoreTokenMax bytes that are not white space. It
// returns "" when the next byte is white space, and an error with "" at the
// end of input.
func (t *RestoreReader) readToken() (string, error) {
	var b []byte
	for len(b) < restoreTokenMax {
		c, err := t.r.ReadByte()
		if err != nil {
			if len(b) == 0 {
				return "", err
			}
			break
		}
		if isRestoreSpace(c) {
			_ = t.r.UnreadByte()
			break
		}
		b = append(b, c)
	}
	return string(b), nil
}
