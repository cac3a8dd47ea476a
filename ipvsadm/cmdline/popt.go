package cmdline

import "strings"

// This file reproduces how libpopt 1.19's poptGetNextOpt walks an argument
// vector with ipvsadm's option table (no aliases, no exec entries, no
// config files). ipvsadm's error messages depend on popt's exact behaviour:
// which word is "the bad option", when a word is an option argument and when
// it is a positional one, and in which order problems are met.

// poptErrorCode is one of popt's POPT_ERROR_* values that ipvsadm can meet.
type poptErrorCode int

const (
	poptMissingArgument poptErrorCode = -10 // POPT_ERROR_NOARG
	poptUnknownOption   poptErrorCode = -11 // POPT_ERROR_BADOPT
	poptUnwantedArg     poptErrorCode = -12 // POPT_ERROR_UNWANTEDARG
)

// poptError is a popt failure: the code and the argv word popt reports as
// the bad option (poptBadOption: the last word it consumed).
type poptError struct {
	code   poptErrorCode
	badOpt string
}

// message is the line ipvsadm prints for a popt error, without newline.
func (e *poptError) message() string {
	var reason string
	switch e.code {
	case poptMissingArgument:
		reason = "missing argument"
	case poptUnwantedArg:
		reason = "option does not take an argument"
	default:
		reason = "unknown option"
	}
	return e.badOpt + ": " + reason
}

// poptParser is the state of one popt context over argv (argv[0] is the
// program name and is skipped).
type poptParser struct {
	argv []string
	next int // index of the next word to look at

	// charArg holds the rest of a short-option cluster still to be
	// processed; inCluster says whether there is one (it is never empty
	// while inCluster is true).
	charArg   string
	inCluster bool

	// restLeftover is set by "--" (and, in POSIX mode, by the first
	// positional word): every later word is positional.
	restLeftover bool
	posix        bool

	leftovers []string
	// consumed marks words taken by the "!#:+" expansion; the main loop
	// skips them.
	consumed []bool
}

// newPoptParser starts parsing argv. posix is popt's POSIXLY_CORRECT mode
// (set when POSIXLY_CORRECT or POSIX_ME_HARDER is in the environment):
// option processing stops at the first positional word.
func newPoptParser(argv []string, posix bool) *poptParser {
	return &poptParser{argv: argv, next: 1, posix: posix, consumed: make([]bool, len(argv))}
}

// badOpt is popt's poptBadOption: the last argv word consumed.
func (p *poptParser) badOpt() string {
	if p.next-1 < len(p.argv) && p.next > 0 {
		return p.argv[p.next-1]
	}
	return ""
}

func (p *poptParser) fail(code poptErrorCode) *poptError {
	return &poptError{code: code, badOpt: p.badOpt()}
}

// nextOption returns the next option and its argument. arg is nil when the
// option has no argument, or when an optional argument was not given. done
// is true when argv is exhausted; positional words met on the way are
// collected in p.leftovers.
func (p *poptParser) nextOption() (opt *OptionSpec, arg *string, done bool, err *poptError) {
	for {
		if !p.inCluster && p.next >= len(p.argv) {
			return nil, nil, true, nil
		}
		var longArg *string
		opt = nil
		if !p.inCluster {
			if p.consumed[p.next] {
				p.next++
				continue
			}
			word := p.argv[p.next]
			p.next++
			if p.restLeftover || word == "" || word[0] != '-' || word == "-" {
				if p.posix {
					p.restLeftover = true
				}
				p.leftovers = append(p.leftovers, word)
				continue
			}
			if word == "--" {
				p.restLeftover = true
				continue
			}
			name, oneDash := word[1:], true
			if name[0] == '-' {
				name, oneDash = name[1:], false
			}
			if eq := strings.IndexByte(name, '='); eq >= 0 {
				value := name[eq+1:]
				longArg = &value
				name = name[:eq]
			}
			if !oneDash {
				// Only "--name" is looked up as a long option; ipvsadm has
				// no option flagged for single-dash long names.
				if opt = findLong(name); opt == nil {
					return nil, nil, false, p.fail(poptUnknownOption)
				}
			} else {
				// "-list" is the cluster -l -i -s t.
				p.charArg, p.inCluster = word[1:], true
				longArg = nil
			}
		}
		if p.inCluster {
			cluster := p.charArg
			p.inCluster = false
			if opt = findShort(cluster[0]); opt == nil {
				return nil, nil, false, p.fail(poptUnknownOption)
			}
			if len(cluster) > 1 {
				p.charArg, p.inCluster = cluster[1:], true
			}
		}

		if opt.Arg == ArgNone {
			if longArg != nil || (p.inCluster && p.charArg[0] == '=') {
				return nil, nil, false, p.fail(poptUnwantedArg)
			}
			return opt, nil, false, nil
		}
		switch {
		case longArg != nil:
			v := p.expand(*longArg)
			arg = &v
		case p.inCluster:
			v := strings.TrimPrefix(p.charArg, "=")
			v = p.expand(v)
			arg = &v
			p.inCluster = false
		case p.next >= len(p.argv):
			if opt.Arg != ArgOptional {
				return nil, nil, false, p.fail(poptMissingArgument)
			}
		case opt.Arg == ArgOptional && strings.HasPrefix(p.argv[p.next], "-"):
			// An optional argument is not taken from a word that looks
			// like an option (popt checks the word even if "!#:+" has
			// already consumed it).
		default:
			v := p.argv[p.next]
			p.next++
			v = p.expand(v)
			arg = &v
		}
		return opt, arg, false, nil
	}
}

// expand is popt's expandNextArg: each "!#:+" in an option argument is
// replaced by the next positional word after the current position, which is
// then no longer seen as positional. (popt loops forever when such a word
// does not exist but words remain; here the text is then kept unchanged.)
func (p *poptParser) expand(s string) string {
	const marker = "!#:+"
	if !strings.Contains(s, marker) {
		return s
	}
	var b strings.Builder
	var word string
	found := false
	for i := 0; i < len(s); i++ {
		if s[i] == '!' && strings.HasPrefix(s[i+1:], marker[1:]) {
			if !found {
				word, found = p.takeNextPositional()
			}
			if found {
				b.WriteString(word)
				i += len(marker) - 1
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// takeNextPositional is popt's findNextArg(con, 1, 1): the first word from
// the current position that does not start with '-' and was not taken
// before; it is marked as taken.
func (p *poptParser) takeNextPositional() (string, bool) {
	for i := p.next; i < len(p.argv); i++ {
		if p.consumed[i] || strings.HasPrefix(p.argv[i], "-") {
			continue
		}
		p.consumed[i] = true
		return p.argv[i], true
	}
	return "", false
}

// takeLeftover is poptGetArg: the next positional word.
func (p *poptParser) takeLeftover() (string, bool) {
	if len(p.leftovers) == 0 {
		return "", false
	}
	w := p.leftovers[0]
	p.leftovers = p.leftovers[1:]
	return w, true
}
