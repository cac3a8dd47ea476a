package keepalived

import (
	"fmt"
	"strconv"
	"strings"
)

// keyword is one entry of a level's table: what keepalived 2.2.7's checker
// process does with a statement that starts with it.
type keyword struct {
	// run handles the statement (nil: nothing but what the other fields
	// say). It is called before the statement's block is read.
	run func(c *conv, s *stmt)
	// args is how many words after the keyword the handler reads; more
	// are a notice (keepalived ignores them). -1: any number.
	args int
	// sub is the level of the block that follows (keepalived's
	// install_sublevel); end runs when that block closes.
	sub *level
	end func(c *conv)
	// values: the block holds one value a line (alloc_value_block, for
	// virtual_server_group); run gets each value line through values.
	values func(c *conv, owner, s *stmt)
	// skip: a block outside the IPVS table, read over with its braces
	// counted (keepalived's skip_sublevel); the text names its kind.
	skip string
	// why: the statement changes nothing in the table; a notice says why
	// ("" for a plain "ignored").
	why string
	// ignore marks a keyword whose only effect is the notice of why.
	ignore bool
}

// level is the table of the keywords of one kind of block.
type level struct {
	name string
	kws  map[string]*keyword
}

// reader walks the statements as lib/parser.c process_stream does: each
// keyword is looked up, case-sensitively, in the table of its block;
// braces are lines of their own.
type reader struct {
	c     *conv
	stmts []*stmt
	i     int
}

// block reads statements of lv until the '}' that closes it (depth > 0)
// or the end. owner is the statement that opened it (nil at the top).
// needOpen: the next line must be the block's '{'.
// It returns whether a '}' closed the block.
func (r *reader) block(lv *level, owner *stmt, depth int, needOpen bool) bool {
	for r.i < len(r.stmts) {
		s := r.stmts[r.i]
		r.i++
		if needOpen {
			needOpen = false
			if s.Brace == '{' {
				continue
			}
			r.c.notice(s, "no '{' after %s at line %d: keepalived reads the lines that follow as its block, up to the next '}'", owner.Words[0], owner.Line)
		} else if s.Brace == '{' {
			r.c.notice(s, "'{' where no block opens: keepalived ignores it, reads what follows as part of %s, and the next '}' closes %s", lv.name, lv.name)
			continue
		}
		if s.Brace == '}' {
			if depth > 0 {
				return true
			}
			r.c.notice(s, "extra '}': keepalived ignores it")
			continue
		}
		k := lv.kws[s.Words[0]]
		if k == nil {
			r.unknown(lv, s)
			continue
		}
		if k.args >= 0 && len(s.Words)-1 > k.args {
			r.c.notice(s, "%s: keepalived reads %s and ignores the rest (%s)", s.Words[0], wordsCount(k.args), strings.Join(s.Words[1+k.args:], " "))
		}
		switch {
		case k.skip != "":
			r.c.skipped(s, k.skip)
			r.skipBlock()
			continue
		case k.values != nil:
			if k.run != nil {
				k.run(r.c, s)
			}
			r.valueBlock(s, k.values)
			if k.end != nil {
				k.end(r.c)
			}
			continue
		case k.ignore:
			if k.why != "" {
				r.c.note(s, "%s: ignored (%s)", s.Words[0], k.why)
			} else {
				r.c.note(s, "%s: ignored", s.Words[0])
			}
		}
		if k.run != nil {
			k.run(r.c, s)
		}
		if k.sub != nil {
			if !r.block(k.sub, s, depth+1, true) {
				r.c.notice(s, "%s: its '{' is never closed: keepalived reads to the end of the configuration", s.Words[0])
			}
			if k.end != nil {
				k.end(r.c)
			}
		}
	}
	return false
}

// unknown reports a keyword keepalived does not know in lv. A block after
// it is not skipped: keepalived reads its lines as lv's, and its '}'
// closes lv.
func (r *reader) unknown(lv *level, s *stmt) {
	kw := s.Words[0]
	if strings.ContainsFunc(kw, func(c rune) bool { return c > '~' || c < '!' }) {
		kw = strconv.Quote(kw)
	}
	hint := ""
	for name := range lv.kws {
		if strings.EqualFold(name, s.Words[0]) {
			hint = fmt.Sprintf(" (keywords are case-sensitive: %s)", name)
		}
	}
	if r.i < len(r.stmts) && r.stmts[r.i].Brace == '{' && lv.name != "the top level" {
		r.c.notice(s, "%s: unknown keyword in %s%s: keepalived ignores it, reads its block's lines as %s's, and its '}' closes %s", kw, lv.name, hint, lv.name, lv.name)
		return
	}
	r.c.notice(s, "%s: unknown keyword in %s%s: keepalived ignores it", kw, lv.name, hint)
}

// skipBlock reads over the block after the statement just read, counting
// braces; a statement without a block skips nothing.
func (r *reader) skipBlock() {
	if r.i >= len(r.stmts) || r.stmts[r.i].Brace != '{' {
		return
	}
	depth := 0
	for r.i < len(r.stmts) {
		s := r.stmts[r.i]
		r.i++
		switch s.Brace {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return
			}
		}
	}
}

// valueBlock reads a block of values, one a line, up to the first '}'
// (lib/parser.c alloc_value_block: no nesting).
func (r *reader) valueBlock(owner *stmt, each func(c *conv, owner, s *stmt)) {
	first := true
	for r.i < len(r.stmts) {
		s := r.stmts[r.i]
		r.i++
		if first {
			first = false
			if s.Brace == '{' {
				continue
			}
			r.c.notice(s, "no '{' after %s at line %d: keepalived reads the lines that follow as its values, up to the next '}'", owner.Words[0], owner.Line)
		}
		if s.Brace == '}' {
			return
		}
		if s.Brace == '{' {
			r.c.notice(s, "'{' in %s: keepalived reads it as a value and skips it", owner.Words[0])
			continue
		}
		each(r.c, owner, s)
	}
	r.c.notice(owner, "%s: its '{' is never closed: keepalived reads to the end of the configuration", owner.Words[0])
}

func wordsCount(n int) string {
	switch n {
	case 0:
		return "no value"
	case 1:
		return "one value"
	}
	return fmt.Sprintf("%d values", n)
}
