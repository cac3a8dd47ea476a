// Package desired reads a desired IPVS rule set (a rules.Set) from the two
// formats lvsctl accepts: the rules text ipvsadm -S and ipvsadm-save write,
// as admins keep it in /etc/ipvsadm.rules, and the JSON document
// `lvsctl list --json` prints, which it also writes (WriteJSON).
//
// Both formats go through ipvsadm's own parser (ipvsadm.Program.Parse): a
// JSON service becomes the -A line it stands for. So a rule means the same
// thing, with the same defaults and the same checks, whichever way it is
// written, and whether ipvsadm -R or lvsctl reads it. A whole file is read
// and checked before anything is returned; every error names the file and
// line.
package desired

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/names"
	"github.com/lvskit/lvskit/rules"
)

// LineError is a problem at one line of a rules file.
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Read reads a rule set from data, named name in messages, in the format
// its first non-blank byte announces: '{' for JSON, anything else for rules
// text. The resolver answers host and service names in rules text (nil
// means the system's files).
func Read(name string, data []byte, res *names.Resolver) (*rules.Set, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return ReadJSON(name, data, res)
	}
	return ReadText(name, data, res)
}

// ReadText reads rules text: one "-A" line per service and one "-a" line
// per destination, after its service, as ipvsadm -S writes them. Lines
// starting with '#' and blank lines are skipped, like Debian's
// ipvsadm-restore does; a leading "ipvsadm" word is dropped, like ipvsadm -R
// does. Any other command, a NUL byte or invalid UTF-8, a line ipvsadm would
// refuse, a destination before its service, and a service or destination
// given twice are errors.
func ReadText(name string, data []byte, res *names.Resolver) (*rules.Set, error) {
	if res == nil {
		res = names.NewResolver()
	}
	r := reader{name: name, p: &ipvsadm.Program{Resolver: res}, index: map[rules.ServiceKey]int{},
		// Every destination is a line: this never grows.
		arena: make([]rules.Dest, 0, bytes.Count(data, []byte{'\n'})+1), tail: -1}
	r.set.Services = make([]rules.Service, 0, bytes.Count(data, []byte("-A"))) // about one per service
	lineNo := 0
	var fields [][]byte
	for rest := data; len(rest) > 0; {
		lineNo++
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return nil, r.errorf(lineNo, "NUL byte in the line")
		}
		if !utf8.Valid(line) {
			return nil, r.errorf(lineNo, "not valid UTF-8")
		}
		fields = splitFields(fields[:0], line)
		if len(fields) == 0 || fields[0][0] == '#' {
			continue
		}
		if err := r.line(lineNo, fields); err != nil {
			return nil, err
		}
	}
	if err := firstDuplicate(&r.set); err != nil {
		return nil, err
	}
	return &r.set, nil
}

// firstDuplicate reports the destination given twice in a service whose
// second definition comes first in the file, or nil. A map per service
// would cost more than the rest of the read: each service's destinations
// are sorted by key, by position, and neighbours compared.
func firstDuplicate(set *rules.Set) error {
	var dup *rules.DuplicateError
	var dupLine int
	var order []int32
	for i := range set.Services {
		s := &set.Services[i]
		order = order[:0]
		for j := range s.Dests {
			order = append(order, int32(j))
		}
		slices.SortFunc(order, func(a, b int32) int {
			if c := rules.DestKeyOf(&s.Dests[a].Destination).Compare(rules.DestKeyOf(&s.Dests[b].Destination)); c != 0 {
				return c
			}
			return int(a - b)
		})
		for j := 1; j < len(order); j++ {
			first, another := &s.Dests[order[j-1]], &s.Dests[order[j]]
			if rules.DestKeyOf(&first.Destination) != rules.DestKeyOf(&another.Destination) {
				continue
			}
			if dup == nil || another.Source.Line < dupLine {
				dup = &rules.DuplicateError{What: "destination",
					Name:  rules.DestKeyOf(&first.Destination).String() + " of " + rules.KeyOf(&s.Service).String(),
					First: first.Source.String(), Another: another.Source.String()}
				dupLine = another.Source.Line
			}
		}
	}
	if dup != nil {
		return dup
	}
	return nil
}

// splitFields cuts a line into words at blanks (space, tab, CR), dropping
// "ipvsadm" words as ipvsadm -R's reader does.
func splitFields(fields [][]byte, line []byte) [][]byte {
	for len(line) > 0 {
		i := 0
		for i < len(line) && isBlank(line[i]) {
			i++
		}
		line = line[i:]
		j := 0
		for j < len(line) && !isBlank(line[j]) {
			j++
		}
		if j > 0 && string(line[:j]) != "ipvsadm" {
			fields = append(fields, line[:j])
		}
		line = line[j:]
	}
	return fields
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

// reader collects one file's rules.
type reader struct {
	name  string
	p     *ipvsadm.Program
	set   rules.Set
	index map[rules.ServiceKey]int // position of each service in set
	// arena holds the destinations of services whose lines come
	// together, as in every saved file, in one allocation; tail is the
	// service whose destinations end it (-1 for none).
	arena   []rules.Dest
	tail    int
	tailKey rules.ServiceKey
	fast    ipvsadm.Invocation
}

func (r *reader) errorf(line int, format string, args ...any) error {
	return &LineError{File: r.name, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// line adds the rule of one line.
func (r *reader) line(lineNo int, fields [][]byte) error {
	inv := &r.fast
	if !ipvsadm.ParseFast(fields, inv) {
		var local *ipvsadm.Outcome
		inv, local = r.p.Parse(ipvsadm.RestoreArgv("ipvsadm", fields))
		if local != nil {
			msg := strings.TrimSpace(local.Stderr)
			if msg == "" || strings.HasPrefix(msg, "Try `") {
				msg = "not a rule ipvsadm accepts"
			}
			return r.errorf(lineNo, "%s", msg)
		}
	}
	return r.add(lineNo, inv)
}

// add puts a parsed -A or -a line into the set.
func (r *reader) add(lineNo int, inv *ipvsadm.Invocation) error {
	src := rules.Source{File: r.name, Line: lineNo}
	switch inv.Command {
	case ipvsadm.CmdAddService:
		svc := inv.ServiceKey()
		k := rules.KeyOf(&svc)
		if i, dup := r.index[k]; dup {
			return &rules.DuplicateError{What: "service", Name: k.String(), First: r.set.Services[i].Source.String(), Another: src.String()}
		}
		r.index[k] = len(r.set.Services)
		r.set.Services = append(r.set.Services, rules.Service{Service: svc, Source: src})
	case ipvsadm.CmdAddServer:
		svc := inv.ServiceKey()
		k := rules.KeyOf(&svc)
		i, ok := r.tail, r.tail >= 0 && k == r.tailKey // a service's lines come together
		if !ok {
			if i, ok = r.index[k]; !ok {
				return r.errorf(lineNo, "destination of service %s, which no earlier -A line defines", k)
			}
		}
		s := &r.set.Services[i]
		d := rules.Dest{Destination: inv.Dest, Source: src}
		if d.Family == 0 {
			d.Family = svc.Family
		}
		switch {
		case i == r.tail:
			r.arena = append(r.arena, d)
			s.Dests = r.arena[len(r.arena)-len(s.Dests)-1 : len(r.arena) : len(r.arena)]
		case len(s.Dests) == 0:
			r.arena = append(r.arena, d)
			s.Dests = r.arena[len(r.arena)-1 : len(r.arena) : len(r.arena)]
			r.tail, r.tailKey = i, k
		default: // lines of services interleaved: a slice of its own
			s.Dests = append(s.Dests, d)
		}
	default:
		return r.errorf(lineNo, "only -A (add service) and -a (add server) lines describe a rule set, not %s", inv.Command.Name())
	}
	return nil
}

// ReadFrom reads all of rd and then calls Read.
func ReadFrom(name string, rd io.Reader, res *names.Resolver) (*rules.Set, error) {
	data, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return Read(name, data, res)
}
