// Package keepalived reads a keepalived.conf as keepalived 2.2.7 does.
//
// It turns the virtual servers into lvsctl's desired state with health
// checks (a rules/desired Document of version 2), with notices for what the
// conversion leaves out or changes.
package keepalived

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Error is a problem at one line of a configuration file.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Stmt is one line as keepalived reads it: a line of the file is cut
// before each unquoted brace and after it, so a statement holds either
// words or one brace (lib/parser.c read_line keeps the text after a brace
// for its next line).
type Stmt struct {
	File  string
	Line  int
	Words []string
	// Brace is '{' or '}' for a line that is one brace, else 0.
	Brace byte
	seq   int // place in the reading order
}

// FS is what the parser asks of the file system. Nil fields mean the
// real system's (os.ReadFile, filepath.Glob).
type FS struct {
	ReadFile func(name string) ([]byte, error)
	Glob     func(pattern string) ([]string, error)
}

func (f FS) readFile(name string) ([]byte, error) {
	if f.ReadFile != nil {
		return f.ReadFile(name)
	}
	return os.ReadFile(name)
}

func (f FS) glob(p string) ([]string, error) {
	if f.Glob != nil {
		return f.Glob(p)
	}
	return filepath.Glob(p)
}

// maxIncludeDepth bounds nested includes; a file that includes itself
// (directly or not) is refused before that.
const maxIncludeDepth = 32

type token struct {
	text  string
	file  string
	line  int
	brace bool // an unquoted { or }
	eol   bool // the end of a line: ends a statement
}

type lexer struct {
	fs       FS
	configID string
	toks     []token
	stack    []string // files being read, outermost first
	notices  []Notice
}

// ParseFile reads name and the files it includes into statements, in
// the order keepalived reads them.
// Notices report includes whose glob matched nothing (keepalived skips
// them too).
func ParseFile(name string, fsys FS, configID string) ([]*Stmt, []Notice, error) {
	data, err := fsys.readFile(name)
	if err != nil {
		return nil, nil, err
	}
	return Parse(name, data, fsys, configID)
}

// Parse reads data, the contents of the file name, and the files it
// includes (relative include paths are taken from name's directory, as
// keepalived does) into statements.
//
// The syntax is keepalived 2.2.7's: words are separated by blanks; "..."
// is one word without its quotes (no escapes inside); an unquoted '!' or
// '#' starts a comment to the end of the line, and "\!" or "\#" outside
// quotes is the character itself; an unquoted '{' or '}' stands alone
// wherever it is; "include PATTERN" on a line of its own reads the files
// the glob matches, in order. A line "@ID rest" is "rest" when configID
// is ID and nothing otherwise; "@^ID rest" the reverse (keepalived's -i).
// keepalived has no line continuation but in "$NAME=" definitions, which,
// with "~SEQ" and "~LST", this parser refuses as errors.
func Parse(name string, data []byte, fsys FS, configID string) ([]*Stmt, []Notice, error) {
	// About one token per 5 bytes of a typical file: sized once, as a
	// configuration of 2,000 services has over a million.
	lx := &lexer{fs: fsys, configID: configID, toks: make([]token, 0, len(data)/5)}
	if err := lx.file(name, data); err != nil {
		return nil, nil, err
	}
	return build(lx.toks), lx.notices, nil
}

func (lx *lexer) file(name string, data []byte) error {
	for _, f := range lx.stack {
		if f == filepath.Clean(name) {
			return fmt.Errorf("%s: included again from within itself (%s)", name, strings.Join(lx.stack, " -> "))
		}
	}
	if len(lx.stack) >= maxIncludeDepth {
		return fmt.Errorf("%s: includes nest deeper than %d files", name, maxIncludeDepth)
	}
	lx.stack = append(lx.stack, filepath.Clean(name))
	defer func() { lx.stack = lx.stack[:len(lx.stack)-1] }()
	var words []string
	var braces []bool
	text := string(data)
	for n := 1; len(text) > 0; n++ {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		var err error
		words, braces, err = splitLineInto(words[:0], braces[:0], strings.TrimRight(line, "\r"))
		if err != nil {
			// lib/parser.c alloc_strvec_r: an unmatched quote ends the
			// line's words there.
			lx.notices = append(lx.notices, Notice{File: name, Line: n, Msg: "a quote without its end: keepalived reads the words before it and drops the rest of the line"})
		}
		if len(words) > 0 && !braces[0] && strings.HasPrefix(words[0], "@") {
			id, not := strings.CutPrefix(words[0][1:], "^")
			if (id == lx.configID) == not {
				continue
			}
			words, braces = words[1:], braces[1:]
		}
		if len(words) == 0 {
			continue
		}
		if !braces[0] {
			switch w := words[0]; {
			case w == "include":
				if len(words) != 2 {
					return &Error{name, n, "include: want one file name or pattern"}
				}
				if err := lx.include(name, n, words[1]); err != nil {
					return err
				}
				continue
			case strings.HasPrefix(w, "$"), strings.HasPrefix(w, "~"):
				return &Error{name, n, fmt.Sprintf("%q: keepalived's definitions and sequences are not supported", w)}
			}
		}
		for j, w := range words {
			lx.toks = append(lx.toks, token{text: w, file: name, line: n, brace: braces[j]})
		}
		lx.toks = append(lx.toks, token{file: name, line: n, eol: true})
	}
	return nil
}

func (lx *lexer) include(from string, line int, pattern string) error {
	if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(filepath.Dir(from), pattern)
	}
	files, err := lx.fs.glob(pattern)
	if err != nil {
		return &Error{from, line, fmt.Sprintf("include %s: %v", pattern, err)}
	}
	if len(files) == 0 {
		if !strings.ContainsAny(pattern, "*?[") {
			return &Error{from, line, fmt.Sprintf("include %s: no such file", pattern)}
		}
		lx.notices = append(lx.notices, Notice{File: from, Line: line, Msg: fmt.Sprintf("include %s matches no file", pattern)})
		return nil
	}
	for _, f := range files { // filepath.Glob sorts, as glob(3) does
		data, err := lx.fs.readFile(f)
		if err != nil {
			return &Error{from, line, fmt.Sprintf("include: %v", err)}
		}
		if err := lx.file(f, data); err != nil {
			if _, ok := err.(*Error); ok {
				return err
			}
			return &Error{from, line, err.Error()}
		}
	}
	return nil
}

// splitLine splits one line into words, telling unquoted braces, after
// dropping its comment.
func splitLine(line string) (words []string, braces []bool, err error) {
	return splitLineInto(nil, nil, line)
}

// splitLineInto is splitLine appending to words and braces.
func splitLineInto(words []string, braces []bool, line string) ([]string, []bool, error) {
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			braces = append(braces, false)
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			end := strings.IndexByte(line[i+1:], '"')
			if end < 0 {
				flush()
				return words, braces, fmt.Errorf("unterminated quote: %s", line)
			}
			flush()
			words = append(words, line[i+1:i+1+end])
			braces = append(braces, false)
			i += end + 1
		case c == '\\' && i+1 < len(line) && (line[i+1] == '#' || line[i+1] == '!'):
			cur.WriteByte(line[i+1])
			inWord = true
			i++
		case c == '#' || c == '!':
			flush()
			return words, braces, nil
		case c == '{' || c == '}':
			flush()
			words = append(words, string(c))
			braces = append(braces, true)
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f':
			flush()
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, braces, nil
}

// build cuts tokens into statements: the words of a line up to a brace,
// and each brace alone.
func build(toks []token) []*Stmt {
	var out []*Stmt
	var cur *Stmt
	end := func() {
		if cur != nil {
			out = append(out, cur)
			cur = nil
		}
	}
	for _, t := range toks {
		switch {
		case t.eol:
			end()
		case t.brace:
			end()
			out = append(out, &Stmt{File: t.file, Line: t.line, Brace: t.text[0], seq: len(out)})
		default:
			if cur == nil {
				cur = &Stmt{File: t.file, Line: t.line, seq: len(out)}
			}
			cur.Words = append(cur.Words, t.text)
		}
	}
	end()
	return out
}
