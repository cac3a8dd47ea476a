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

// stmt is one line as keepalived reads it: a line of the file is cut
// before each unquoted brace and after it, so a statement holds either
// words or one brace (lib/parser.c read_line keeps the text after a brace
// for its next line).
type stmt struct {
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

// origin is the line of a file a line of text comes from: for a line of
// a ~SEQ or of a multi-line definition, the line that holds the ~SEQ or
// uses the definition.
type origin struct {
	file string
	line int
}

// inFile is a file being read.
type inFile struct {
	name  string
	lines []string
	n     int // lines read
}

// glob is an entry of keepalived's include stack: the files one include
// line matched, read one after the other (lib/parser.c include_file_t).
type glob struct {
	files []string
	next  int
	cur   *inFile
	at    origin // the include line
}

type lexer struct {
	fs       FS
	configID string
	stmts    []*stmt
	notices  []Notice
	incs     []*glob // the include stack, innermost last
	defs             // $NAME definitions and ~SEQ / ~LST, defs.go
}

// parse reads data, the contents of the file name, and the files it
// includes into statements, as keepalived 2.2.7's lib/parser.c read_line
// hands them to its keywords.
//
// Each line loses its comment (an unquoted '!' or '#'; "\!" and "\#"
// outside quotes are the characters) and its leading and trailing
// blanks. A line "@ID rest" is "rest" when configID is ID and nothing
// otherwise, "@^ID rest" the reverse (keepalived's -i). "$NAME=text"
// defines NAME, and "$NAME" or "${NAME}" is then replaced by its text;
// "~SEQ(...)" and "~LST(...)" repeat the rest of their line (defs.go).
// "include PATTERN" reads the files the glob matches, in order, relative
// to the including file's directory. Then the line is cut before each
// unquoted '{' or '}' and after it, and each part split into words:
// blanks separate words, and "..." is one word without its quotes (no
// escapes inside). A '\' ends a line only in a definition.
//
// Statements, errors and notices name the line of the file the text
// comes from; a line of a ~SEQ or of a multi-line definition names the
// line of the ~SEQ or of the definition's use.
func parse(name string, data []byte, fsys FS, configID string) ([]*stmt, []Notice, error) {
	// About one statement per 20 bytes of a typical file: sized once, as
	// a configuration of 2,000 services has over 300,000.
	lx := &lexer{fs: fsys, configID: configID, stmts: make([]*stmt, 0, len(data)/20)}
	lx.defs.init()
	lx.incs = []*glob{{cur: newInFile(name, data)}}
	for {
		line, at, ok, err := lx.readLine()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			break
		}
		lx.statement(line, at)
	}
	return lx.stmts, lx.notices, nil
}

func newInFile(name string, data []byte) *inFile {
	return &inFile{name: name, lines: strings.Split(string(data), "\n")}
}

// notice records a notice at the statement to come.
func (lx *lexer) notice(at origin, format string, args ...any) {
	lx.notices = append(lx.notices, Notice{File: at.file, Line: at.line, Msg: fmt.Sprintf(format, args...), seq: len(lx.stmts)})
}

// statement splits one line that read_line gives, a brace alone or words
// without an unquoted brace, into a statement.
func (lx *lexer) statement(line string, at origin) {
	if line == "{" || line == "}" {
		lx.stmts = append(lx.stmts, &stmt{File: at.file, Line: at.line, Brace: line[0], seq: len(lx.stmts)})
		return
	}
	words, err := splitWords(nil, line)
	if err != nil {
		// lib/parser.c alloc_strvec_r: an unmatched quote ends the
		// line's words there.
		lx.notice(at, "a quote without its end: keepalived reads the words before it and drops the rest of the line")
	}
	if len(words) > 0 {
		lx.stmts = append(lx.stmts, &stmt{File: at.file, Line: at.line, Words: words, seq: len(lx.stmts)})
	}
}

// readLine is lib/parser.c read_line: the next line to hand to the
// keywords, or false at the end. Its text comes, first found first, from
// what followed a brace on the line before, from the innermost ~SEQ or
// ~LST still repeating (unless a multi-line definition's text began
// within it), from a multi-line definition's text, or from the files.
func (lx *lexer) readLine() (string, origin, bool, error) {
	for {
		var buf string
		var at origin
		switch {
		case lx.residue != nil:
			buf, at = *lx.residue, lx.residueAt
			lx.residue = nil
			if lx.residueMade {
				lx.made++
			}
			// Each part after a brace is shorter than its line, unless a
			// replacement grows it: more parts than a line has characters
			// is a definition bringing itself back after a brace.
			if lx.parts++; lx.parts > maxLine {
				return "", origin{}, false, &Error{at.file, at.line, "a definition brings itself back after a brace without end: keepalived never finishes reading this line"}
			}
		case len(lx.seqs) > lx.mlDepth:
			buf, at = lx.seqLine()
			lx.made, lx.parts = lx.made+1, 0
		case lx.ml != nil:
			buf, at = lx.mlLine()
			lx.made, lx.parts = lx.made+1, 0
		default:
			var ok bool
			var err error
			if buf, at, ok, err = lx.fileLine(); err != nil || !ok {
				return "", origin{}, false, err
			}
			lx.parts = 0
		}
		if lx.made > maxMade {
			return "", origin{}, false, &Error{at.file, at.line, fmt.Sprintf("~SEQ, ~LST and definitions of several lines make more than %d lines: lvsctl reads no more (keepalived reads on, maybe without end)", maxMade)}
		}
		if lx.inDef != nil {
			lx.defLine(buf)
			continue
		}
		if buf == "" {
			continue
		}
		lx.replaced = false
		buf, err := lx.expand(buf, at)
		if err != nil {
			return "", origin{}, false, err
		}
		// What follows a brace that a replacement put in is made too: a
		// definition may bring itself back after a brace, without end.
		lx.residueMade = lx.replaced
		if buf == "" {
			continue
		}
		if buf[len(buf)-1] == '\\' && !lx.once(at, `\`) {
			lx.notice(at, "a '\\' ending a line continues a definition only: keepalived reads it as a character of the line")
		}
		if pattern, ok := includeLine(buf); ok {
			if err := lx.include(at, pattern); err != nil {
				return "", origin{}, false, err
			}
			continue
		}
		return lx.cutBrace(buf, at), at, true, nil
	}
}

// fileLine is the next line of the files that is not empty once
// decommented. An empty line ends a multi-line definition (read_line).
func (lx *lexer) fileLine() (string, origin, bool, error) {
	for len(lx.incs) > 0 {
		g := lx.incs[len(lx.incs)-1]
		if g.cur != nil && g.cur.n < len(g.cur.lines) {
			f := g.cur
			raw := strings.TrimRight(f.lines[f.n], "\r\n")
			f.n++
			if raw == "" {
				if lx.inDef != nil {
					lx.notice(origin{f.name, f.n}, "an empty line ends the definition of $%s (line %d) although its line before ends with '\\': keepalived reads the lines after it as they are", lx.inDefName, lx.inDefAt.line)
				}
				lx.endDef()
				continue
			}
			if line := decomment(raw); line != "" {
				return line, origin{f.name, f.n}, true, nil
			}
			continue
		}
		if g.next < len(g.files) {
			name := g.files[g.next]
			g.next++
			if err := lx.open(g, name); err != nil {
				return "", origin{}, false, err
			}
			continue
		}
		lx.incs = lx.incs[:len(lx.incs)-1]
	}
	return "", origin{}, false, nil
}

// open makes name the file g reads, refusing a file that is being read
// already (keepalived would include it again and again).
func (lx *lexer) open(g *glob, name string) error {
	var chain []string
	for _, o := range lx.incs {
		if o.cur != nil && o != g {
			chain = append(chain, o.cur.name)
			if filepath.Clean(o.cur.name) == filepath.Clean(name) {
				return &Error{g.at.file, g.at.line, fmt.Sprintf("%s: included again from within itself (%s)", name, strings.Join(append(chain, name), " -> "))}
			}
		}
	}
	if len(chain) >= maxIncludeDepth {
		return &Error{g.at.file, g.at.line, fmt.Sprintf("%s: includes nest deeper than %d files", name, maxIncludeDepth)}
	}
	data, err := lx.fs.readFile(name)
	if err != nil {
		return &Error{g.at.file, g.at.line, fmt.Sprintf("include: %v", err)}
	}
	g.cur = newInFile(name, data)
	return nil
}

// includeLine tells an include line (lib/parser.c is_include: "include",
// or "include" and one of r, m, w, b, a, then a blank) and gives its
// pattern. The letters change only which of keepalived's complaints are
// errors; the files read are the same.
func includeLine(buf string) (string, bool) {
	rest, ok := strings.CutPrefix(buf, "include")
	if !ok || rest == "" {
		return "", false
	}
	switch {
	case isSpace(rest[0]):
	case len(rest) > 1 && strings.IndexByte("rmwba", rest[0]) >= 0 && isSpace(rest[1]):
		rest = rest[1:]
	default:
		return "", false
	}
	return strings.TrimLeft(rest[1:], " \t"), true
}

// include pushes the files pattern matches on the include stack: they are
// read next, before the rest of the including file. A relative pattern
// is taken from the directory of the file being read, where keepalived
// has changed its directory to.
func (lx *lexer) include(at origin, pattern string) error {
	words, _ := splitWords(nil, pattern)
	if len(words) != 1 {
		return &Error{at.file, at.line, "include: want one file name or pattern"}
	}
	pattern = words[0]
	if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(filepath.Dir(lx.current()), pattern)
	}
	alts := braces(pattern)
	if len(alts) > maxBraces {
		return &Error{at.file, at.line, fmt.Sprintf("include %s: its braces make %d patterns, more than lvsctl reads (%d)", pattern, len(alts), maxBraces)}
	}
	var files []string
	for _, p := range alts {
		// filepath.Glob sorts, as glob(3) does for each alternative.
		f, err := lx.fs.glob(p)
		if err != nil {
			return &Error{at.file, at.line, fmt.Sprintf("include %s: %v", pattern, err)}
		}
		files = append(files, f...)
	}
	if len(files) == 0 {
		if !strings.ContainsAny(pattern, "*?[{") {
			return &Error{at.file, at.line, fmt.Sprintf("include %s: no such file", pattern)}
		}
		lx.notice(at, "include %s matches no file", pattern)
		return nil
	}
	lx.incs = append(lx.incs, &glob{files: files, at: at})
	return nil
}

// maxBraces bounds the patterns an include's braces make.
const maxBraces = 1 << 10

// braces expands the braces of a pattern as glob(3)'s GLOB_BRACE, which
// keepalived asks for, does: "a{b,c{d,e}}f" is abf, acdf, acef, in that
// order. A '{' without its '}' is a character.
func braces(p string) []string {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}
	}
	depth := 0
	cuts := []int{open}
	for i := open; i < len(p); i++ {
		switch p[i] {
		case '{':
			depth++
		case ',':
			if depth == 1 {
				cuts = append(cuts, i)
			}
		case '}':
			if depth--; depth == 0 {
				var out []string
				for k, c := range cuts {
					end := i
					if k+1 < len(cuts) {
						end = cuts[k+1]
					}
					out = append(out, braces(p[:open]+p[c+1:end]+p[i+1:])...)
					if len(out) > maxBraces {
						break // too many: include refuses them
					}
				}
				return out
			}
		}
	}
	return []string{p}
}

// current is the name of the file being read (keepalived's directory).
func (lx *lexer) current() string {
	for i := len(lx.incs) - 1; i >= 0; i-- {
		if c := lx.incs[i].cur; c != nil {
			return c.name
		}
	}
	return ""
}

// cutBrace keeps of buf the text up to its first unquoted brace, or that
// brace alone when buf begins with it; the rest is read as the next line
// (read_line's line_residue). Trailing blanks go.
func (lx *lexer) cutBrace(buf string, at origin) string {
	p := 0
	if buf[0] != '{' && buf[0] != '}' {
		p = -1
		for i := 0; i < len(buf); i++ {
			if buf[i] == '"' {
				j := strings.IndexByte(buf[i+1:], '"')
				if j < 0 {
					break
				}
				i += j + 1
				continue
			}
			if buf[i] == '{' || buf[i] == '}' {
				p = i
				break
			}
		}
	}
	if p >= 0 {
		skip := 0
		if p == 0 {
			skip = 1 + len(buf[1:]) - len(strings.TrimLeft(buf[1:], " \t"))
		}
		if p+skip < len(buf) {
			rest := strings.TrimRight(buf[p+skip:], " \t")
			lx.residue, lx.residueAt = &rest, at
			buf = buf[:p+skip]
		}
	}
	return strings.TrimRight(buf, " \t")
}

// decomment is lib/parser.c decomment: it drops an unquoted '!' or '#'
// and what follows, the '\' of "\!" and "\#" outside quotes, and leading
// and trailing blanks. A '\' ending the line stays, just after the text
// without its blanks (it continues a definition).
func decomment(s string) string {
	s = strings.TrimLeft(s, " \t")
	if !strings.ContainsAny(s, "\\!#") {
		return strings.TrimRight(s, " \t")
	}
	out := make([]byte, 0, len(s))
	quote, cont := false, false
	skip := -1 // where the comment starts in out
loop:
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			if skip < 0 {
				quote = !quote
			}
		case c == '\\':
			switch {
			case i+1 == len(s):
				cont = true
				break loop
			case !quote && (s[i+1] == '#' || s[i+1] == '!'):
				out = append(out, s[i+1])
			default:
				out = append(out, c, s[i+1])
			}
			i++
			continue
		case !quote && skip < 0 && (c == '!' || c == '#'):
			skip = len(out)
		}
		out = append(out, c)
	}
	if skip >= 0 {
		out = out[:skip]
	}
	s = strings.TrimRight(string(out), " \t")
	if cont {
		s += `\`
	}
	return s
}

// splitWords appends the words of line to words (lib/parser.c
// alloc_strvec_r): blanks separate them, and a word beginning with '"'
// runs to the next '"', without the quotes. An unmatched quote ends the
// words, with an error.
func splitWords(words []string, line string) ([]string, error) {
	for {
		line = strings.TrimLeft(line, " \t\f\n\r\v")
		if line == "" {
			return words, nil
		}
		if line[0] == '"' {
			end := strings.IndexByte(line[1:], '"')
			if end < 0 {
				return words, fmt.Errorf("unterminated quote: %s", line)
			}
			words = append(words, line[1:1+end])
			line = line[2+end:]
			continue
		}
		end := strings.IndexAny(line, " \t\f\n\r\v\"")
		if end < 0 {
			end = len(line)
		}
		words = append(words, line[:end])
		line = line[end:]
	}
}

// splitLine is one line of a file as keepalived's keywords get it: words,
// braces alone, no comment.
func splitLine(line string) ([]string, error) {
	lx := &lexer{}
	var words []string
	var err error
	for buf := decomment(line); buf != ""; {
		buf = lx.cutBrace(buf, origin{})
		if buf == "{" || buf == "}" {
			words = append(words, buf)
		} else if words, err = splitWords(words, buf); err != nil {
			return words, err
		}
		buf = ""
		if lx.residue != nil {
			buf, lx.residue = *lx.residue, nil
		}
	}
	return words, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}
