package keepalived

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
)

// keepalived 2.2.7 rewrites each line before its keywords see it
// (lib/parser.c read_line): this file follows it.
//
// "$NAME=text" (NAME a letter or '_', then letters, digits and '_', the
// '=' right after it) at the start of a line defines NAME from there on;
// a later definition replaces it. "$NAME" before a blank, ',' or ')' or
// at the end of the line, and "${NAME}" anywhere, are replaced by the
// text, which is read again for more: replacement is textual and
// recursive, and a line never grows to maxLine characters. A '\' ending
// the definition's line continues it on the next lines, up to a line
// without it or an empty line; such a definition is replaced only at the
// end of a line, and its lines are read in place of the rest.
// "~SEQ(NAME, start, step, end) text" reads text once for each NAME from
// start to end; "~LST(NAME, a, b) text" once for each value listed.
// Text keepalived keeps as written ($NAME undefined, or followed by
// another character) gets a notice naming the line.

// maxLine is keepalived's MAXBUF: a replacement that would make a line as
// long is not made, nor any after it on that line.
const maxLine = 1024

// maxReplacements bounds the replacements of one line: past it the text
// keeps bringing itself back ($A=$A), where keepalived never ends.
// maxReplacementsAll bounds those of a file, each costing up to a line's
// copy: a definition that brings itself back after a brace makes lines
// without end, each replaced up to maxLine.
var (
	maxReplacements    = 10000
	maxReplacementsAll = 1 << 22
)

// maxRepeats bounds the lines one ~SEQ or ~LST repeats, maxMade those
// all of them and the definitions of several lines make: a definition
// that ends by using itself, or ~SEQs nested deep, read on without end.
var (
	maxRepeats = int64(1 << 20)
	maxMade    = 1 << 21
)

// def is one definition (lib/parser.c def_t).
type def struct {
	value string
	// multiline: the value's lines are '\n'-separated, and the
	// definition is replaced only at the end of a line.
	multiline bool
	// std computes a standard definition's value; nil once redefined.
	std func(lx *lexer, name string) (string, error)
	// params: the definition takes numbers, as ${_RANDOM 1 9}.
	params bool
}

// repeat is a ~SEQ or ~LST reading its text again (lib/parser.c seq_t).
type repeat struct {
	text string
	at   origin
	// ~SEQ: name takes next, then next+step, left times.
	name             string
	next, step, left int64
	hex              bool
	// ~LST: names take each set of values in turn.
	names []string
	sets  [][]string
}

// mlText is what is left to read of a multi-line definition's text.
type mlText struct {
	rest string
	at   origin // the line that used the definition
}

type mlSaved struct {
	text  *mlText
	depth int
}

// defs is the state read_line keeps between lines.
type defs struct {
	byName map[string]*def
	seqs   []*repeat // the ~SEQ and ~LST repeating, innermost last
	// ml is the rest of the multi-line definition being read, mlStack
	// those it interrupted. mlDepth is how many repeats were running when
	// ml began: those wait until it ends.
	ml      *mlText
	mlStack []mlSaved
	mlDepth int
	// residue is what followed a brace on the line before.
	residue   *string
	residueAt origin
	// inDef is the multi-line definition whose lines are being read,
	// begun at inDefAt.
	inDef     *def
	inDefName string
	inDefAt   origin
	// stopped: the last replace stopped short of maxLine.
	stopped bool
	// made counts the lines made by repeats and definitions, replacements
	// the replacements; replaced: the line being read had one, and so
	// residueMade: the residue comes from one.
	made, replacements    int
	replaced, residueMade bool
	parts                 int // the parts after a brace of the line being read
	told                  map[told]bool
}

type told struct {
	at   origin
	what string
}

// once tells whether what was told of the line at already, and marks it
// told: a line of the files has one notice for each thing, whatever the
// number of lines a ~SEQ or a definition makes of it.
func (d *defs) once(at origin, what string) bool {
	if d.told == nil {
		d.told = map[told]bool{}
	}
	k := told{at, what}
	if d.told[k] {
		return true
	}
	d.told[k] = true
	return false
}

// init sets keepalived's standard definitions (set_std_definitions).
func (d *defs) init() {
	d.byName = map[string]*def{
		"_PWD":      {std: pwd},
		"_INSTANCE": {std: func(lx *lexer, _ string) (string, error) { return lx.configID, nil }},
		"_RANDOM":   {std: random, params: true},
		"_HASH":     {value: "#"},
		"_BANG":     {value: "!"},
	}
}

// pwd is ${_PWD}: keepalived's working directory, the directory of the
// file it reads (it changes to it when it opens the file).
func pwd(lx *lexer, _ string) (string, error) {
	dir, err := filepath.Abs(filepath.Dir(lx.current()))
	if err != nil {
		return "", err
	}
	if lx.fs.ReadFile == nil { // getcwd(3) gives the path without symbolic links
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
	}
	return dir, nil
}

func random(*lexer, string) (string, error) {
	return "", fmt.Errorf("${_RANDOM}: keepalived draws a new number each time it reads the configuration; lvsctl cannot write one that stays the same")
}

// set is lib/parser.c set_definition, as a ~SEQ or ~LST sets its names.
func (d *defs) set(name, value string) {
	if x := d.byName[name]; x != nil {
		x.value, x.std = value, nil
		return
	}
	d.byName[name] = &def{value: value}
}

// seqLine is read_line's next line of the innermost repeat.
func (d *defs) seqLine() (string, origin) {
	s := d.seqs[len(d.seqs)-1]
	if s.names == nil {
		if s.hex {
			d.set(s.name, strconv.FormatUint(uint64(s.next), 16))
		} else {
			d.set(s.name, strconv.FormatInt(s.next, 10))
		}
		s.next += s.step
	} else {
		for i, n := range s.names {
			d.set(n, s.sets[0][i])
		}
		s.sets = s.sets[1:]
	}
	if s.left--; s.left == 0 {
		d.seqs = d.seqs[:len(d.seqs)-1]
	}
	return s.text, s.at
}

// mlLine is read_line's next line of a multi-line definition's text.
func (d *defs) mlLine() (string, origin) {
	m := d.ml
	if i := strings.IndexByte(m.rest, '\n'); i >= 0 {
		line := m.rest[:i]
		m.rest = m.rest[i+1:]
		return line, m.at
	}
	if n := len(d.mlStack); n > 0 {
		d.ml, d.mlDepth = d.mlStack[n-1].text, d.mlStack[n-1].depth
		d.mlStack = d.mlStack[:n-1]
	} else {
		d.ml, d.mlDepth = nil, 0
	}
	return m.rest, m.at
}

// defLine adds a line to the multi-line definition being read: a line
// ending with '\' continues it, another is its last.
func (d *defs) defLine(buf string) {
	x := d.inDef
	if b, ok := strings.CutSuffix(buf, `\`); ok {
		buf = strings.TrimRight(b, " \t") + "\n"
		if len(buf) >= 2 { // a line of '\' alone adds nothing
			x.value += buf
		}
		return
	}
	d.endDef()
	x.value += buf
}

// endDef ends the multi-line definition being read, if any; one with no
// text is an empty definition of one line.
func (d *defs) endDef() {
	if d.inDef != nil {
		if d.inDef.value == "" {
			d.inDef.multiline = false
		}
		d.inDef = nil
	}
}

// expand is read_line's rewriting of one line, until nothing changes:
// "@ID" and "@^ID" prefixes, a definition, a ~SEQ or ~LST, replacements.
// It gives "" for a line that is gone.
func (lx *lexer) expand(buf string, at origin) (string, error) {
	for round := 0; ; round++ {
		if round > maxReplacements {
			return "", &Error{at.file, at.line, "the definitions used here bring themselves back without end: keepalived never finishes reading this line"}
		}
		if buf[0] == '@' {
			if buf = lx.instance(buf); buf == "" {
				return "", nil
			}
		}
		if buf[0] == '$' && lx.define(buf, at) {
			return "", nil
		}
		if strings.HasPrefix(buf, "~SEQ") || strings.HasPrefix(buf, "~LST") {
			return "", lx.addRepeat(buf, at)
		}
		if buf[0] == '~' || !strings.Contains(buf, "$") {
			return buf, nil
		}
		out, changed, err := lx.replace(buf, at, maxLine)
		if err != nil {
			return "", err
		}
		if !changed {
			if !lx.stopped {
				lx.unreplaced(out, at)
			}
			return out, nil
		}
		if buf = decomment(out); buf == "" {
			return "", nil
		}
		if buf[0] != '@' && !strings.Contains(buf, "$") {
			return buf, nil
		}
	}
}

// instance is read_line's "@ID rest" (rest when ID is the configuration
// id) and "@^ID rest" (rest unless it is); "" drops the line, as does an
// ID with nothing after it.
func (lx *lexer) instance(buf string) string {
	id, not := strings.CutPrefix(buf[1:], "^")
	end := strings.IndexAny(id, " \t")
	if end < 0 || (id[:end] == lx.configID) == not {
		return ""
	}
	return strings.TrimLeft(id[end:], " \t")
}

// define reads a definition (lib/parser.c check_definition); false: buf
// is no definition, and is read as a line of keywords.
func (lx *lexer) define(buf string, at origin) bool {
	if len(buf) < 2 || !isNameStart(buf[1]) {
		return false
	}
	eq := 2
	for ; eq < len(buf) && buf[eq] != '='; eq++ {
		if !isNameChar(buf[eq]) {
			return false
		}
	}
	if eq == len(buf) {
		return false
	}
	x := lx.byName[buf[1:eq]]
	if x == nil {
		x = &def{}
		lx.byName[buf[1:eq]] = x
	}
	x.std, x.multiline = nil, false
	x.value = strings.TrimLeft(buf[eq+1:], " \t")
	if v, ok := strings.CutSuffix(x.value, `\`); ok {
		x.multiline = true
		if x.value = strings.TrimRight(v, " \t"); x.value != "" {
			x.value += "\n"
		}
		lx.inDef, lx.inDefName, lx.inDefAt = x, buf[1:eq], at
	}
	return true
}

// use is a use of a definition at the start of s, the text after a '$'
// (lib/parser.c find_definition): its definition, its name, and its
// length in s. A multi-line definition is used only at the end of the
// line; nil: no use.
func (lx *lexer) use(s string) (*def, string, int) {
	braces := s[0] == '{'
	name := s
	if braces {
		name = s[1:]
	}
	if name == "" || !isNameStart(name[0]) {
		return nil, "", 0
	}
	n := 1
	for n < len(name) && isNameChar(name[n]) {
		n++
	}
	size, params := n, false
	if braces {
		p, last := n, -1
		for ; p < len(name) && (name[p] == ' ' || isDigit(name[p])); p++ {
			if name[p] != ' ' {
				params, last = true, p
			}
		}
		if params && last+1 != p || p == len(name) || name[p] != '}' {
			return nil, "", 0
		}
		size = p + 2
	} else if n < len(name) && strings.IndexByte(" \t,)", name[n]) < 0 {
		return nil, "", 0
	}
	x := lx.byName[name[:n]]
	if x == nil || x.multiline && size != len(s) || params && !x.params {
		return nil, "", 0
	}
	return x, name[:n], size
}

// replace is lib/parser.c replace_param: each use in buf is replaced by
// its definition's text, which is read again from where it begins. It
// tells whether anything was replaced; a replacement that would make buf
// max long or more is not made, nor any after it, and buf is kept with
// those made.
func (lx *lexer) replace(buf string, at origin, max int) (string, bool, error) {
	found, n := false, 0
	ml, next := lx.ml, lx.ml
	lx.stopped = false
	for pos := 0; ; {
		i := strings.IndexByte(buf[pos:], '$')
		if i < 0 || pos+i+1 == len(buf) {
			break
		}
		cur := pos + i
		x, name, size := lx.use(buf[cur+1:])
		if x == nil {
			pos = cur + 1
			continue
		}
		if n++; n > maxReplacements {
			return "", false, &Error{at.file, at.line, fmt.Sprintf("$%s brings itself back without end: keepalived never finishes reading this line", name)}
		}
		if lx.replacements++; lx.replacements > maxReplacementsAll {
			return "", false, &Error{at.file, at.line, fmt.Sprintf("definitions are replaced more than %d times: lvsctl reads no more (keepalived reads on, maybe without end)", maxReplacementsAll)}
		}
		lx.replaced = true
		found, next = true, ml
		value := x.value
		if x.std != nil {
			v, err := x.std(lx, name)
			if err != nil {
				return "", false, &Error{at.file, at.line, err.Error()}
			}
			value = v
		}
		text := value
		if x.multiline {
			if ml != nil {
				lx.mlStack = append(lx.mlStack, mlSaved{ml, lx.mlDepth})
			}
			lx.mlDepth = len(lx.seqs)
			if j := strings.IndexByte(value, '\n'); j >= 0 {
				text = value[:j]
				ml = &mlText{rest: value[j+1:], at: at}
				next = ml
			}
			if !lx.once(at, "ml "+name) {
				lx.notice(at, "$%s is a definition of several lines: keepalived reads them here, and what is said of them names this line", name)
			}
		}
		if len(buf)-1-size+len(text) >= max {
			lx.notice(at, "replacing $%s would make the text %d characters or more: keepalived stops replacing and reads it as it is then", name, max)
			lx.stopped = true
			return buf, false, nil
		}
		buf = buf[:cur] + text + buf[cur+1+size:]
		if t := strings.TrimLeft(value, " \t"); t != "" && t[0] == '~' {
			break
		}
	}
	if found {
		lx.ml = next
	}
	return buf, found, nil
}

// unreplaced gives a notice for each '$' and name in a line where nothing
// more is replaced: keepalived keeps it as written.
func (lx *lexer) unreplaced(buf string, at origin) {
	for i := 0; i < len(buf)-1; i++ {
		if buf[i] != '$' {
			continue
		}
		s := buf[i+1:]
		name := strings.TrimPrefix(s, "{")
		if name == "" || !isNameStart(name[0]) {
			continue
		}
		n := 1
		for n < len(name) && isNameChar(name[n]) {
			n++
		}
		if lx.once(at, "$"+name[:n]) {
			continue
		}
		x := lx.byName[name[:n]]
		switch {
		case x == nil:
			lx.notice(at, "$%s: no such definition (yet): keepalived keeps the text as written", name[:n])
		case x.multiline:
			lx.notice(at, "$%s: a definition of several lines is replaced only at the end of a line: keepalived keeps the text as written", name[:n])
		case s[0] == '{':
			lx.notice(at, "${%s: no '}' after the name: keepalived keeps the text as written", name[:n])
		default:
			lx.notice(at, "$%s followed by %q: keepalived replaces $NAME only before a blank, ',' or ')' or at the end of the line (${%s} anywhere), and keeps the text as written", name[:n], name[n], name[:n])
		}
	}
}

// addRepeat reads a "~SEQ(...) text" or "~LST(...) text" line (lib/parser.c
// add_seq, add_lst). An invalid one is dropped, with a notice.
func (lx *lexer) addRepeat(buf string, at origin) error {
	var r *repeat
	var why string
	if buf[1] == 'S' {
		var err error
		if r, why, err = lx.parseSeq(buf, at); err != nil {
			return err
		}
	} else {
		r, why = parseLst(buf)
	}
	if r == nil {
		lx.notice(at, "%s: %s: keepalived reports it invalid and skips the line", buf, why)
		return nil
	}
	if r.left > maxRepeats {
		return &Error{at.file, at.line, fmt.Sprintf("%s: repeats its line %d times, more than lvsctl reads (%d)", buf, r.left, maxRepeats)}
	}
	r.at = at
	lx.seqs = append(lx.seqs, r)
	return nil
}

// parseSeq is add_seq: "~SEQ(NAME, end)" counts from 1 (from -1 to a
// negative end, down to 0), "~SEQ(NAME, start, end)" by 1 or -1,
// "~SEQ(NAME, start, step, end)" by step; numbers as strtol(3) with base
// 0 reads them, after replacing definitions. "~SEQx" writes NAME in
// hexadecimal.
func (lx *lexer) parseSeq(buf string, at origin) (*repeat, string, error) {
	p := buf[4:]
	r := &repeat{}
	if p != "" && p[0] == 'x' {
		r.hex, p = true, p[1:]
	}
	p = strings.TrimLeft(p, " \t")
	if p == "" || p[0] != '(' {
		return nil, "no '(' after ~SEQ", nil
	}
	p = strings.TrimLeft(p[1:], " \t")
	end := strings.IndexAny(p, " \t,)")
	if end < 0 {
		end = len(p)
	}
	r.name = p[:end]
	p = strings.TrimLeft(p[end:], " \t")
	if p == "" || p[0] == ')' || r.name == "" {
		return nil, "no name and numbers", nil
	}
	p = strings.TrimLeft(p[1:], " \t") // keepalived skips the ',' unread
	close := strings.IndexByte(p, ')')
	if close < 0 {
		return nil, "no ')'", nil
	}
	r.text = strings.TrimLeft(p[close+1:], " \t")
	// seq_buf: 3 numbers of 20 characters, their separators, a nul.
	const seqBuf = 3*20 + 3 + 1
	if close+2 > seqBuf {
		return nil, "its numbers are too long", nil
	}
	args, _, err := lx.replace(p[:close+1], at, seqBuf)
	if err != nil {
		return nil, "", err
	}
	var n [3]int64
	k := 0
	for {
		n[k], args = strtol(args)
		args = strings.TrimLeft(args, " \t")
		if args == "" || args[0] != ',' && args[0] != ')' || args[0] == ',' && k == 2 {
			return nil, "a number is not one", nil
		}
		if args[0] == ')' {
			break
		}
		args = args[1:]
		k++
	}
	var start, step, last int64
	switch k {
	case 0:
		last, step, start = n[0], 1, 1
		if last < 1 {
			step = -1
		}
		if last < 0 {
			start = -1
		}
	case 1:
		start, last, step = n[0], n[1], 1
		if start > last {
			step = -1
		}
	case 2:
		start, step, last = n[0], n[1], n[2]
		if step == 0 || start < last && step < 0 || start > last && step > 0 {
			return nil, "its step does not lead from start to end", nil
		}
	}
	if r.hex && (start < 0 || last < 0) {
		return nil, "~SEQx takes no negative number", nil
	}
	r.next, r.step = start, step
	if step > 0 {
		r.left = int64(min((uint64(last)-uint64(start))/uint64(step), math.MaxInt64-1) + 1)
	} else {
		r.left = int64(min((uint64(start)-uint64(last))/(-uint64(step)), math.MaxInt64-1) + 1)
	}
	return r, "", nil
}

// parseLst is add_lst: "~LST(NAME, a, b) text" reads text with NAME a,
// then b; "~LST({N1, N2}, {a1, a2}, {b1}) text" sets each name of a set
// of values, "" for one missing.
func parseLst(buf string) (*repeat, string) {
	p := strings.TrimLeft(buf[4:], " \t")
	r := &repeat{}
	if p == "" || p[0] != '(' {
		return nil, "no '(' after ~LST"
	}
	p = strings.TrimLeft(p[1:], " \t")
	at := func(p string) byte {
		if p == "" {
			return 0
		}
		return p[0]
	}
	skip := func(p string) string { return strings.TrimLeft(p[1:], " \t") }
	endc := byte(',')
	if at(p) == '{' {
		endc, p = '}', skip(p)
	}
	for {
		end := strings.IndexAny(p, " \t,}")
		if end < 0 {
			end = len(p)
		}
		r.names = append(r.names, p[:end])
		p = strings.TrimLeft(p[end:], " \t")
		if at(p) == endc {
			break
		}
		if at(p) != ',' {
			return nil, "its names are not a list"
		}
		p = skip(p)
	}
	if at(p) == '}' {
		p = skip(p)
	}
	if at(p) != ',' {
		return nil, "no values after its names"
	}
	p = strings.TrimLeft(p[1:], " \t")
	for {
		endc = ','
		if at(p) == '{' {
			endc, p = '}', skip(p)
		}
		var set []string
		for {
			end := strings.IndexAny(p, " \t,})")
			if end < 0 {
				end = len(p)
			}
			set = append(set, p[:end])
			p = strings.TrimLeft(p[end:], " \t")
			if at(p) == endc || at(p) == ')' && endc == ',' {
				break
			}
			if at(p) != ',' {
				return nil, "its values are not a list"
			}
			p = skip(p)
			if len(set) >= len(r.names) {
				return nil, "more values than names"
			}
		}
		for len(set) < len(r.names) {
			set = append(set, "")
		}
		r.sets = append(r.sets, set)
		if at(p) == '}' && endc == '}' {
			p = skip(p)
		}
		if at(p) == ')' {
			break
		}
		if at(p) != ',' {
			return nil, "its values are not a list"
		}
		p = skip(p)
	}
	r.text = strings.TrimLeft(p[1:], " \t")
	r.left = int64(len(r.sets))
	return r, ""
}

// strtol reads a number as strtol(3) with base 0 does: blanks, a sign,
// then hexadecimal after "0x", octal after "0", else decimal, clamped to
// int64. No digits: 0, and s unread.
func strtol(s string) (int64, string) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base := uint64(10)
	switch {
	case i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && digit(s[i+2]) < 16:
		base, i = 16, i+2
	case i < len(s) && s[i] == '0':
		base = 8
	}
	start := i
	var v uint64
	over := false
	for ; i < len(s) && digit(s[i]) < base; i++ {
		if v > (math.MaxUint64-digit(s[i]))/base {
			over = true
		}
		v = v*base + digit(s[i])
	}
	if i == start {
		return 0, s
	}
	switch {
	case neg && (over || v > 1<<63):
		return math.MinInt64, s[i:]
	case neg:
		return -int64(v), s[i:]
	case over || v > math.MaxInt64:
		return math.MaxInt64, s[i:]
	}
	return int64(v), s[i:]
}

// digit is c's value as a digit of a base up to 16; 99 if none.
func digit(c byte) uint64 {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0')
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10
	}
	return 99
}

func isDigit(c byte) bool     { return '0' <= c && c <= '9' }
func isNameStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isNameChar(c byte) bool  { return isNameStart(c) || isDigit(c) }
