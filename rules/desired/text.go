// Package desired reads a desired IPVS rule set from lvsctl's two formats.
//
// The result is a rules.Set. One format is the rules text ipvsadm -S and
// ipvsadm-save write, as admins keep it in /etc/ipvsadm.rules. The other is
// the JSON document `lvsctl list --json` prints, which the package also
// writes (WriteJSON).
//
// Both formats go through ipvsadm's own parser (cmdline.Parser.Parse): a
// JSON service becomes the -A line it stands for. So a rule means the same
// thing, with the same defaults and the same checks, whichever way it is
// written, and whether ipvsadm -R or lvsctl reads it. A whole file is read
// and checked before anything is returned; every error names the file and
// line.
package desired

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
	"github.com/lvskit/lvskit/names"
	"github.com/lvskit/lvskit/rules"
)

// lineError is a problem at one line of a rules file.
type lineError struct {
	File string
	Line int
	Msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// ReadText reads rules text: one "-A" line per service and one "-a" line
// per destination, after its service, as ipvsadm -S writes them. Lines
// starting with '#' and blank lines are skipped, like Debian's
// ipvsadm-restore does; a leading "ipvsadm" word is dropped, like ipvsadm -R
// does. Any other command, a NUL byte or invalid UTF-8, a line ipvsadm would
// refuse, a destination before its service, and a service or destination
// given twice are errors.
func ReadText(name string, data []byte, res *names.Resolver) (*rules.Set, error) {
	r := newReader(name, res)
	for rest := data; len(rest) > 0; {
		if n, ok, err := r.templateLine(rest); err != nil {
			return nil, err
		} else if ok {
			rest = rest[n+1:]
			continue
		}
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if err := r.textLine(line); err != nil {
			return nil, err
		}
	}
	return r.finish()
}

// readFrom is Read without the health checks.
func readFrom(name string, rd io.Reader, res *names.Resolver) (*rules.Set, error) {
	set, _, err := Read(name, rd, res)
	return set, err
}

// Read reads a rule set from rd, named name in messages: JSON when its
// first non-blank byte is '{', YAML (the JSON document's schema, with
// comments) when its first line that is not blank or a comment opens a
// mapping ("version: 2"), rules text otherwise. The resolver answers host
// and service names in rules text (nil means the system's files). Rules
// text is read a line at a time, so the file is never held whole and no
// buffer is regrown while reading a pipe (figures: decision 0013). It also
// returns the document's health checks (nil for none, and for rules text,
// which has no place for them).
func Read(name string, rd io.Reader, res *names.Resolver) (*rules.Set, *Health, error) {
	return ReadCached(name, rd, res, nil)
}

// ReadCached is Read that keeps a YAML document's service entries in
// cache (when not nil), parsed and decoded, and takes from it those a
// previous read saw: a process that reads the same file again (lvsctl
// run, on reload) parses and decodes only the entries that changed.
func ReadCached(name string, rd io.Reader, res *names.Resolver, cache *YAMLCache) (*rules.Set, *Health, error) {
	br := bufio.NewReaderSize(rd, 64<<10)
	head, err := br.Peek(br.Size())
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, nil, fmt.Errorf("reading %s: %w", name, err)
	}
	t := bytes.TrimLeft(head, " \t\r\n")
	if yaml := isYAML(head); yaml || len(t) > 0 && t[0] == '{' {
		data, err := readAll(br, rd)
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s: %w", name, err)
		}
		var lines lineTable
		if yaml {
			if data, lines, err = yamlToJSON(data, cache); err != nil {
				if le, ok := err.(*lineError); ok {
					le.File = name
				}
				return nil, nil, err
			}
			if cache != nil && cache.order != nil {
				if set, h, ok, err := readJSONCached(name, data, lines, res, cache); ok {
					return set, h, err
				}
			}
		}
		return readJSON(name, data, lines, res)
	}
	set, err := readText(name, br, res)
	return set, nil, err
}

// readAll is io.ReadAll(br) into a buffer of the size rd has left when it
// tells it (a file, a bytes or strings reader), not one regrown from 512
// bytes, which costs twice the document (figures: decision 0013).
func readAll(br *bufio.Reader, rd io.Reader) ([]byte, error) {
	size := 0
	switch r := rd.(type) {
	case interface{ Len() int }:
		size = r.Len()
	case *os.File:
		if fi, err := r.Stat(); err == nil && fi.Mode().IsRegular() {
			if off, err := r.Seek(0, io.SeekCurrent); err == nil && off <= fi.Size() {
				size = int(fi.Size() - off)
			}
		}
	}
	// +1: the read that finds the end needs room.
	b := make([]byte, 0, br.Buffered()+size+1)
	for {
		n, err := br.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // full: let append grow it
		}
	}
}

// readText reads rules text, a line at a time.
func readText(name string, br *bufio.Reader, res *names.Resolver) (*rules.Set, error) {
	r := newReader(name, res)
	var long []byte // a line longer than br's buffer, gathered
	for {
		if took, err := r.templateLines(br); err != nil {
			return nil, err
		} else if took {
			continue
		}
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if len(line) > 0 {
			if err := r.textLine(bytes.TrimSuffix(line, []byte{'\n'})); err != nil {
				return nil, err
			}
		}
		if err == io.EOF {
			return r.finish()
		}
	}
}

// templateLines reads the lines like the last one of their kind ParseFast
// read (see cmdline.LineTemplate) in place, as many as br holds, and
// reports whether it took any. Peek only looks (and fills the buffer
// when it runs low).
func (r *reader) templateLines(br *bufio.Reader) (bool, error) {
	if !r.destTmpl.Ready() && !r.svcTmpl.Ready() {
		return false, nil
	}
	if buf, _ := br.Peek(cmdline.TemplateWindow); len(buf) == 0 {
		return false, nil
	}
	buf, _ := br.Peek(br.Buffered())
	used := 0
	for {
		n, ok, err := r.templateLine(buf[used:])
		if err != nil {
			return false, err
		}
		if !ok {
			break
		}
		used += n + 1
	}
	br.Discard(used)
	return used > 0, nil
}

func newReader(name string, res *names.Resolver) *reader {
	if res == nil {
		res = names.NewResolver()
	}
	return &reader{name: name, p: &cmdline.Parser{Resolver: res}, tail: -1, tmplService: -1}
}

// textLine reads the next line of rules text (without its newline).
func (r *reader) textLine(line []byte) error {
	r.lineNo++
	var seen byte
	r.fields, seen = splitFields(r.fields[:0], line)
	if seen&(hasNUL|hasNonASCII) != 0 { // checked only then: most lines are ASCII
		if bytes.IndexByte(line, 0) >= 0 {
			return r.errorf(r.lineNo, "NUL byte in the line")
		}
		if !utf8.Valid(line) {
			return r.errorf(r.lineNo, "not valid UTF-8")
		}
	}
	if len(r.fields) == 0 || r.fields[0][0] == '#' {
		return nil
	}
	fast, err := r.line(r.lineNo, r.fields)
	if fast {
		r.setTemplate(line)
	}
	return err
}

// finish checks what needs the whole file and returns the set.
func (r *reader) finish() (*rules.Set, error) {
	set := &rules.Set{Services: make([]rules.Service, 0, r.nsvc)}
	for _, c := range r.svcChunks {
		set.Services = append(set.Services, c[:min(len(c), r.nsvc-len(set.Services))]...)
	}
	r.svcChunks = nil
	if err := firstDuplicate(set); err != nil {
		return nil, err
	}
	return set, nil
}

// svcChunk is how many services one chunk of a reader holds: services are
// gathered in chunks and copied once into a slice of the exact length,
// not regrown as they come.
const svcChunk = 1024

// lookup finds the service with key k.
func (r *reader) lookup(k rules.ServiceKey) (int, bool) {
	if r.index == nil {
		r.index = make(map[rules.ServiceKey]int, r.nsvc)
		for i := range r.nsvc {
			r.index[rules.KeyOf(&r.svc(i).Service)] = i
		}
	}
	i, ok := r.index[k]
	return i, ok
}

// svc returns the i-th service read.
func (r *reader) svc(i int) *rules.Service { return &r.svcChunks[i/svcChunk][i%svcChunk] }

// newService appends s and returns its index.
func (r *reader) newService(s rules.Service) int {
	if r.nsvc%svcChunk == 0 {
		r.svcChunks = append(r.svcChunks, make([]rules.Service, svcChunk))
	}
	*r.svc(r.nsvc) = s
	r.nsvc++
	return r.nsvc - 1
}

// firstDuplicate reports the service, or destination of a service, given
// twice whose second definition comes first in the file, or nil. Maps
// would cost more than the rest of the read: services, and each service's
// destinations, are sorted by key, then position, and neighbours compared.
func firstDuplicate(set *rules.Set) error {
	var dup *rules.DuplicateError
	var dupLine int
	var order []int32
	for i := range set.Services {
		order = append(order, int32(i))
	}
	svcs := set.Services
	slices.SortFunc(order, func(a, b int32) int {
		if c := rules.KeyOf(&svcs[a].Service).Compare(rules.KeyOf(&svcs[b].Service)); c != 0 {
			return c
		}
		return int(a - b)
	})
	for j := 1; j < len(order); j++ {
		first, another := &svcs[order[j-1]], &svcs[order[j]]
		if k := rules.KeyOf(&first.Service); k == rules.KeyOf(&another.Service) && (dup == nil || another.Source.Line < dupLine) {
			dup = &rules.DuplicateError{What: "service", Name: k.String(), First: first.Source.String(), Another: another.Source.String()}
			dupLine = another.Source.Line
		}
	}
	for i := range set.Services {
		s := &set.Services[i]
		if strictlyCanonical(s.Dests) {
			continue // no key twice; most files list destinations so
		}
		order = order[:0]
		for j := range s.Dests {
			order = append(order, int32(j))
		}
		slices.SortFunc(order, func(a, b int32) int {
			if c := rules.CompareDests(&s.Dests[a].Destination, &s.Dests[b].Destination); c != 0 {
				return c
			}
			return int(a - b)
		})
		for j := 1; j < len(order); j++ {
			first, another := &s.Dests[order[j-1]], &s.Dests[order[j]]
			if rules.DestKeyOf(&first.Destination) != rules.DestKeyOf(&another.Destination) {
				continue
			}
			if dup == nil || int(another.Line) < dupLine {
				dup = &rules.DuplicateError{What: "destination",
					Name:  rules.DestKeyOf(&first.Destination).String() + " of " + rules.KeyOf(&s.Service).String(),
					First: s.SourceOf(first).String(), Another: s.SourceOf(another).String()}
				dupLine = int(another.Line)
			}
		}
	}
	if dup != nil {
		return dup
	}
	return nil
}

// strictlyCanonical reports whether ds are in canonical order with no key
// twice.
func strictlyCanonical(ds []rules.Dest) bool {
	for j := 1; j < len(ds); j++ {
		if rules.CompareDests(&ds[j-1].Destination, &ds[j].Destination) >= 0 {
			return false
		}
	}
	return true
}

// splitFields cuts a line into words at blanks (space, tab, CR, VT, FF),
// dropping "ipvsadm" words as ipvsadm -R's reader does. It also says, as
// the union of byteClass flags, whether the line holds a NUL byte or a
// byte above ASCII: the one pass over the line serves both.
func splitFields(fields [][]byte, line []byte) ([][]byte, byte) {
	var seen byte
	for i := 0; i < len(line); {
		for i < len(line) && byteClass[line[i]]&blank != 0 {
			i++
		}
		start := i
		for i < len(line) {
			c := byteClass[line[i]]
			if c&blank != 0 {
				break
			}
			seen |= c
			i++
		}
		if w := line[start:i]; len(w) > 0 && string(w) != "ipvsadm" {
			fields = append(fields, w)
		}
	}
	return fields, seen
}

// Flags of byteClass.
const (
	blank       = 1 << iota // a word separator
	hasNUL                  // the NUL byte
	hasNonASCII             // a byte of a multi-byte UTF-8 sequence, or not UTF-8
)

// byteClass classifies each byte for splitFields.
var byteClass = func() (t [256]byte) {
	for _, c := range []byte(" \t\r\v\f") {
		t[c] = blank
	}
	t[0] = hasNUL
	for c := 0x80; c < 0x100; c++ {
		t[c] = hasNonASCII
	}
	return t
}()

// reader collects one file's rules.
type reader struct {
	name string
	p    *cmdline.Parser
	// svcChunks hold the nsvc services read (see newService).
	svcChunks [][]rules.Service
	nsvc      int
	// index finds services by key for destination lines away from their
	// service's; made at the first such line (a saved file has none).
	index map[rules.ServiceKey]int
	// arena holds the destinations of services whose lines come
	// together, as in every saved file, in chunks of destChunk; tail is the
	// service whose destinations end it (-1 for none).
	arena   []rules.Dest
	tail    int
	tailKey rules.ServiceKey
	lineNo  int      // lines of text read
	fields  [][]byte // the current line's words
	fast    cmdline.Invocation
	// svcTmpl and destTmpl are the last service and destination lines
	// ParseFast read: the lines that differ from them only in their
	// addresses are parsed without being split into words.
	svcTmpl, destTmpl cmdline.LineTemplate
	// tmplService is the service destTmpl's service is when it is the
	// tail (-1 otherwise).
	tmplService int
}

func (r *reader) errorf(line int, format string, args ...any) error {
	return &lineError{File: r.name, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// line adds the rule of one line; fast says ParseFast read it (into
// r.fast).
func (r *reader) line(lineNo int, fields [][]byte) (fast bool, err error) {
	inv := &r.fast
	if fast = cmdline.ParseFast(fields, inv); !fast {
		var ended *cmdline.Outcome
		inv, ended = r.p.Parse(cmdline.RestoreArgv("ipvsadm", fields))
		if ended != nil {
			msg := strings.TrimSpace(ended.Stderr)
			if msg == "" || strings.HasPrefix(msg, "Try `") {
				msg = "not a rule ipvsadm accepts"
			}
			return false, r.errorf(lineNo, "%s", msg)
		}
	}
	return fast, r.add(lineNo, inv)
}

// add puts a parsed -A or -a line into the set.
func (r *reader) add(lineNo int, inv *cmdline.Invocation) error {
	src := rules.Source{File: r.name, Line: lineNo}
	switch inv.Command {
	case cmdline.CmdAddService:
		svc := inv.ServiceKey()
		k := rules.KeyOf(&svc)
		i := r.newService(rules.Service{Service: svc, Source: src}) // given twice: see firstDuplicate
		if r.index != nil {
			r.index[k] = i
		}
		// Its destinations come next in a saved file: found without the
		// index, which is then never made.
		r.tail, r.tailKey = i, k
	case cmdline.CmdAddServer:
		svc := inv.ServiceKey()
		k := rules.KeyOf(&svc)
		i, ok := r.tail, r.tail >= 0 && k == r.tailKey // a service's lines come together
		if !ok {
			if i, ok = r.lookup(k); !ok {
				return r.errorf(lineNo, "destination of service %s, which no earlier -A line defines", k)
			}
		}
		r.addDest(i, k, svc.Family, lineNo, &inv.Dest)
	default:
		return r.errorf(lineNo, "only -A (add service) and -a (add server) lines describe a rule set, not %s", inv.Command.Name())
	}
	return nil
}

// addDest adds destination d, read at line lineNo, to the i-th service,
// whose key is k and family family.
func (r *reader) addDest(i int, k rules.ServiceKey, family ipvs.Family, lineNo int, dest *ipvs.Destination) {
	s := r.svc(i)
	d := rules.Dest{Destination: *dest, Line: int32(lineNo)}
	if d.Family == 0 {
		d.Family = family
	}
	n := len(s.Dests)
	if i != r.tail && n > 0 { // lines of services interleaved: a slice of its own
		s.Dests = append(s.Dests, d)
		return
	}
	if i != r.tail {
		r.tail, r.tailKey = i, k
	}
	if len(r.arena) == cap(r.arena) {
		// A new chunk; the service's run so far moves along, so that
		// its destinations stay together.
		fresh := make([]rules.Dest, 0, max(destChunk, 2*(n+1)))
		r.arena = append(fresh, s.Dests...)
	}
	r.arena = append(r.arena, d)
	s.Dests = r.arena[len(r.arena)-n-1 : len(r.arena) : len(r.arena)]
}

// templateLine reads the line at the start of buf with a template when
// one matches it (see cmdline.LineTemplate) and adds its rule; it returns
// the line's length without its newline.
func (r *reader) templateLine(buf []byte) (int, bool, error) {
	n, inv, newService, ok := r.destTmpl.Match(buf)
	if !ok {
		if n, inv, _, ok = r.svcTmpl.Match(buf); !ok {
			return 0, false, nil
		}
	}
	r.lineNo++
	if inv.Command == cmdline.CmdAddServer && !newService && r.tail >= 0 && r.tail == r.tmplService {
		// The template's service, whose destinations end the arena: the
		// line names it in the same words.
		r.addDest(r.tail, r.tailKey, r.tailKey.Family, r.lineNo, &inv.Dest)
		return n, true, nil
	}
	if err := r.add(r.lineNo, inv); err != nil {
		return 0, false, err
	}
	if inv.Command == cmdline.CmdAddServer {
		r.followTemplate()
	}
	return n, true, nil
}

// setTemplate makes line, which ParseFast read into r.fast from r.fields,
// the template of the next lines of its kind.
func (r *reader) setTemplate(line []byte) {
	if r.fast.Command == cmdline.CmdAddService {
		r.svcTmpl.Set(line, r.fields, &r.fast)
		return
	}
	r.destTmpl.Set(line, r.fields, &r.fast)
	r.followTemplate()
}

// followTemplate notes whether destTmpl's service, to which its last line
// was added, is the tail.
func (r *reader) followTemplate() {
	r.tmplService = -1
	if svc := r.destTmpl.Invocation().ServiceKey(); r.tail >= 0 && rules.KeyOf(&svc) == r.tailKey {
		r.tmplService = r.tail
	}
}

// destChunk is how many destinations one chunk of a reader's arena holds
// (384 KiB).
const destChunk = 4096
