package desired

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"strconv"
	"strings"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
	"github.com/lvskit/lvskit/ipvsadm/notation"
	"github.com/lvskit/lvskit/names"
	"github.com/lvskit/lvskit/rules"
)

// SchemaVersion is the version of the document lvsctl list writes. Readers
// take it and HealthVersion, which adds health checks; they refuse others.
const SchemaVersion = 1

// HealthVersion is the version of a document with health checks ("check",
// "when_all_down", "sorry_server"), which lvsctl run reads.
const HealthVersion = 2

// Document is the JSON form of a rule set (docs/lvsctl.md describes it).
// The counters (connections, stats, rates) are written by lvsctl list and
// ignored when a document is read as desired state.
type Document struct {
	Version int `json:"version"`
	// Announce turns on announcing the VIPs to a routing daemon
	// (version 2; see Announce).
	Announce *jsonAnnounce `json:"announce,omitempty"`
	Services []JSONService `json:"services"`
}

// JSONService is one service. Address services have protocol, address and
// port; fwmark services have fwmark and family.
type JSONService struct {
	Protocol       string            `json:"protocol,omitempty"` // tcp, udp, sctp
	Address        string            `json:"address,omitempty"`
	Port           *uint16           `json:"port,omitempty"`
	FWMark         uint32            `json:"fwmark,omitempty"`
	Family         string            `json:"family"` // inet, inet6
	Scheduler      string            `json:"scheduler"`
	SchedulerFlags []string          `json:"scheduler_flags,omitempty"`
	Persistence    *JSONPersistence  `json:"persistence,omitempty"`
	OnePacket      bool              `json:"one_packet,omitempty"`
	PE             string            `json:"pe,omitempty"`
	Destinations   []JSONDestination `json:"destinations"`
	Stats          *jsonCounters     `json:"stats,omitempty"`
	// Check applies to each real server without one of its own (version 2).
	Check *health.Spec `json:"check,omitempty"`
	// Checks, instead of Check, are several checks that must all pass
	// (version 2).
	Checks []health.Spec `json:"checks,omitempty"`
	// WhenAllDown is keep (default), sorry or zero (version 2; see Health).
	WhenAllDown string `json:"when_all_down,omitempty"`
	// SorryServer is the address:port that serves when every real server
	// failed, with when_all_down sorry (version 2).
	SorryServer string `json:"sorry_server,omitempty"`
	// Announce is false (never announced), a prefix, or true (the default
	// with the document's "announce": the service's address).
	Announce *announceField `json:"announce,omitempty"`
}

// JSONPersistence is a persistent service's timeout (seconds) and
// granularity: a dotted IPv4 mask, or an IPv6 prefix length in decimal.
type JSONPersistence struct {
	Timeout uint32 `json:"timeout"`
	Netmask string `json:"netmask"`
}

// JSONDestination is one real server.
type JSONDestination struct {
	Address         string        `json:"address"`
	Port            uint16        `json:"port"`
	Method          string        `json:"method"` // masq, route, tunnel
	Weight          int64         `json:"weight"`
	UpperThreshold  uint32        `json:"upper_threshold,omitempty"`
	LowerThreshold  uint32        `json:"lower_threshold,omitempty"`
	Tunnel          *JSONTunnel   `json:"tunnel,omitempty"`
	ActiveConns     *uint32       `json:"active_conns,omitempty"`
	InactiveConns   *uint32       `json:"inactive_conns,omitempty"`
	PersistentConns *uint32       `json:"persistent_conns,omitempty"`
	Stats           *jsonCounters `json:"stats,omitempty"`
	// Check replaces the service's check (or checks) for this real
	// server (version 2).
	Check *health.Spec `json:"check,omitempty"`
	// Checks, instead of Check, are several checks that must all pass.
	Checks []health.Spec `json:"checks,omitempty"`
}

// JSONTunnel holds a tunnel destination's encapsulation.
type JSONTunnel struct {
	Type     string `json:"type"` // ipip, gue, gre
	Port     uint16 `json:"port,omitempty"`
	Checksum string `json:"checksum,omitempty"` // nocsum, csum, remcsum
}

// jsonCounters are 64-bit counters and, with --rate, the kernel's estimates.
type jsonCounters struct {
	Conns    uint64    `json:"conns"`
	InPkts   uint64    `json:"in_packets"`
	OutPkts  uint64    `json:"out_packets"`
	InBytes  uint64    `json:"in_bytes"`
	OutBytes uint64    `json:"out_bytes"`
	Rate     *jsonRate `json:"rate,omitempty"`
}

// jsonRate holds per-second estimates.
type jsonRate struct {
	CPS    uint64 `json:"conns_per_second"`
	InPPS  uint64 `json:"in_packets_per_second"`
	OutPPS uint64 `json:"out_packets_per_second"`
	InBPS  uint64 `json:"in_bytes_per_second"`
	OutBPS uint64 `json:"out_bytes_per_second"`
}

// Counters selects what WriteJSON adds to the configuration.
type Counters struct {
	Conns bool // active, inactive and persistent connections
	Stats bool // 64-bit counters
	Rate  bool // estimated rates
}

// ToDocument converts a set (in its order) to the JSON document.
func ToDocument(set *rules.Set, c Counters) Document {
	doc := Document{Version: SchemaVersion, Services: make([]JSONService, 0, len(set.Services))}
	for i := range set.Services {
		doc.Services = append(doc.Services, jsonService(&set.Services[i], c))
	}
	return doc
}

// WriteJSON writes set as an indented JSON document.
func WriteJSON(w io.Writer, set *rules.Set, c Counters) error {
	b, err := json.MarshalIndent(ToDocument(set, c), "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func familyName(f ipvs.Family) string {
	if f == ipvs.AFInet6 {
		return "inet6"
	}
	return "inet"
}

func jsonService(s *rules.Service, c Counters) JSONService {
	svc := &s.Service
	js := JSONService{Family: familyName(svc.Family), Scheduler: svc.Scheduler, PE: svc.PEName,
		OnePacket: svc.Flags&ipvs.FlagOnePacket != 0, Destinations: make([]JSONDestination, 0, len(s.Dests))}
	if svc.FWMark != 0 {
		js.FWMark = svc.FWMark
	} else {
		js.Protocol = svc.Protocol.String() // tcp, udp, sctp: all a kernel service can be
		js.Address = svc.Addr.String()
		port := svc.Port
		js.Port = &port
	}
	js.SchedulerFlags = notation.SchedFlagNames(svc.Scheduler, svc.Flags)
	if svc.Flags&ipvs.FlagPersistent != 0 {
		js.Persistence = &JSONPersistence{Timeout: svc.Timeout, Netmask: netmaskText(svc)}
	}
	if c.Stats || c.Rate {
		st := s.KernelStats()
		js.Stats = jsonStats(&st, c.Rate)
	}
	for i := range s.Dests {
		d := &s.Dests[i].Destination
		jd := JSONDestination{Address: d.Addr.String(), Port: d.Port, Method: d.FwdMethod.String(),
			Weight: int64(int32(d.Weight)), UpperThreshold: d.UThreshold, LowerThreshold: d.LThreshold}
		if d.FwdMethod&7 == ipvs.FwdTunnel {
			name, _ := notation.TunTypeName(d.TunType)
			jd.Tunnel = &JSONTunnel{Type: name}
			if d.TunType == ipvs.TunGUE {
				jd.Tunnel.Port = d.TunPort
			}
			if d.TunType != ipvs.TunIPIP {
				jd.Tunnel.Checksum = d.TunFlags.String()
			}
		}
		counters := s.Dests[i].KernelCounters()
		if c.Conns {
			a, in, p := counters.ActiveConns, counters.InactConns, counters.PersistConns
			jd.ActiveConns, jd.InactiveConns, jd.PersistentConns = &a, &in, &p
		}
		if c.Stats || c.Rate {
			jd.Stats = jsonStats(&counters.Stats, c.Rate)
		}
		js.Destinations = append(js.Destinations, jd)
	}
	return js
}

func netmaskText(svc *ipvs.Service) string {
	if svc.Family == ipvs.AFInet6 {
		return strconv.Itoa(int(int32(svc.Netmask)))
	}
	m := svc.Netmask
	return netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}).String()
}

func jsonStats(s *ipvs.Stats, rate bool) *jsonCounters {
	js := &jsonCounters{Conns: s.Conns, InPkts: s.InPkts, OutPkts: s.OutPkts, InBytes: s.InBytes, OutBytes: s.OutBytes}
	if rate {
		js.Rate = &jsonRate{CPS: s.CPS, InPPS: s.InPPS, OutPPS: s.OutPPS, InBPS: s.InBPS, OutBPS: s.OutBPS}
	}
	return js
}

// ReadJSON reads a JSON document. Each service and destination is turned
// into the ipvsadm rule it stands for and checked by ipvsadm's parser, so
// the defaults and checks are those of rules text; errors name the line of
// the field at fault, else of its service or destination. Unknown fields
// are errors, and so is a key an object gives twice (letter case aside,
// as the decoder matches keys to fields).
func ReadJSON(name string, data []byte, res *names.Resolver) (*rules.Set, error) {
	set, _, err := readJSON(name, data, nil, res)
	return set, err
}

// readJSON is ReadJSON with the document's health checks. lines are the
// document's entry lines when its writer knows them (yamlToJSON), nil for
// entryLines to find.
func readJSON(name string, data []byte, lines lineTable, res *names.Resolver) (*rules.Set, *Health, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc Document
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, decodeError(name, data, reflect.TypeFor[Document](), err)
	}
	if dec.More() {
		return nil, nil, &lineError{File: name, Line: lineAt(data, dec.InputOffset()), Msg: "JSON: data after the document"}
	}
	return buildDoc(name, data, &doc, lines, res)
}

// readJSONCached is readJSON of a YAML document just read by entries with
// cache: its skeleton (the JSON with the services' array empty) and each
// entry not decoded before are decoded on their own, the rest is taken
// from the cache. ok is false when any of them does not decode: readJSON
// then reads the whole document, and words the error.
func readJSONCached(name string, data []byte, lines lineTable, res *names.Resolver, cache *YAMLCache) (set *rules.Set, h *Health, ok bool, err error) {
	skel := make([]byte, 0, cache.span[0]+2+len(data)-cache.span[1])
	skel = append(append(append(skel, data[:cache.span[0]]...), "[]"...), data[cache.span[1]:]...)
	var doc Document
	if !decodeStrict(skel, &doc) {
		return nil, nil, false, nil
	}
	doc.Services = make([]JSONService, len(cache.order))
	for i, e := range cache.order {
		if e.svc == nil {
			var svc JSONService
			if !decodeStrict(e.b, &svc) {
				return nil, nil, false, nil
			}
			e.svc = &svc
		}
		// A copy: the build reads the cached entry and changes nothing
		// it points to.
		doc.Services[i] = *e.svc
	}
	set, h, err = buildDoc(name, data, &doc, lines, res)
	return set, h, true, err
}

// decodeStrict decodes one JSON value, unknown fields refused, into v;
// false on any error or anything after the value.
func decodeStrict(b []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil && !dec.More()
}

// buildDoc reads a decoded document into a rule set and its health; data
// is the document's JSON, for the messages.
func buildDoc(name string, data []byte, doc *Document, lines lineTable, res *names.Resolver) (*rules.Set, *Health, error) {
	if res == nil {
		res = names.NewResolver()
	}
	if lines == nil {
		var err error
		if lines, err = checkJSON(data); err != nil {
			err.(*lineError).File = name
			return nil, nil, err
		}
	}
	if doc.Version != SchemaVersion && doc.Version != HealthVersion {
		msg := fmt.Sprintf("\"version\": %d, but this lvsctl reads versions %d and %d", doc.Version, SchemaVersion, HealthVersion)
		var probe struct {
			Version *int `json:"version"`
		}
		if json.Unmarshal(data, &probe) == nil && probe.Version == nil {
			msg = fmt.Sprintf("the document has no \"version\"; write \"version\": %d", SchemaVersion)
		}
		return nil, nil, &lineError{File: name, Line: versionLine(data), Msg: msg}
	}
	r := newReader(name, res)
	h := newHealth(name, doc.Version, data, lines)
	if err := h.announceDoc(doc.Announce); err != nil {
		return nil, nil, err
	}
	dests := 0
	for i := range doc.Services {
		dests += len(doc.Services[i].Destinations)
	}
	h.sizeHint(len(doc.Services), dests)
	var svcWords, destWords words
	n := 0
	for i := range doc.Services {
		js := &doc.Services[i]
		svcWords.reset()
		svcWords.add("-A")
		if err := js.appendArgv(&svcWords); err != nil {
			return nil, nil, r.errorf(h.lineOf(n, errorField(err)), "service %d: %v", i+1, err)
		}
		if err := r.parseWords(lines.at(n), &svcWords); err != nil {
			return nil, nil, atField(err, h, n)
		}
		svcN := n
		n++
		svcKey := rules.KeyOf(&r.svc(r.nsvc - 1).Service)
		if err := h.service(svcN, i, svcKey, js); err != nil {
			return nil, nil, err
		}
		if err := h.announceService(svcN, i, svcKey, r.svc(r.nsvc-1), js); err != nil {
			return nil, nil, err
		}
		// The designator follows -A: "-t addr:port", "-f mark", "-f mark -6".
		designator := 2
		if js.FWMark != 0 && js.Family == "inet6" {
			designator = 3
		}
		for j := range js.Destinations {
			destWords.reset()
			destWords.add("-a")
			destWords.addFrom(&svcWords, 1, 1+designator)
			if err := js.Destinations[j].appendArgv(&destWords); err != nil {
				return nil, nil, r.errorf(h.lineOf(n, errorField(err)), "service %d, destination %d: %v", i+1, j+1, err)
			}
			if err := r.parseWords(lines.at(n), &destWords); err != nil {
				return nil, nil, atField(err, h, n)
			}
			svc := r.svc(r.nsvc - 1)
			dest := rules.DestKeyOf(&svc.Dests[len(svc.Dests)-1].Destination)
			if err := h.dest(lines.at(n), n, i, j, svcKey, dest, js, &js.Destinations[j]); err != nil {
				return nil, nil, err
			}
			n++
		}
		// An mh service's list order decides its lookup table: the
		// document's order is the desired one (list --json writes the
		// kernel's).
		if svc := r.svc(r.nsvc - 1); svc.Scheduler == "mh" {
			svc.Ordered = true
		}
	}
	set, err := r.finish()
	if err != nil {
		return nil, nil, err
	}
	return set, h.result(), nil
}

// ipvsadmFields gives the field of an entry that ipvsadm's message, of a
// rule made of the entry, is about: the first whose words the message
// holds.
var ipvsadmFields = []struct {
	words string
	path  []string
}{
	{"persistent mask", []string{"persistence", "netmask"}},
	{"ipv6 netmask", []string{"persistence", "netmask"}},
	{"timeout value", []string{"persistence", "timeout"}},
	{"scheduler flag", []string{"scheduler_flags"}},
	{"weight", []string{"weight"}},
	{"u_threshold", []string{"upper_threshold"}},
	{"l_threshold", []string{"lower_threshold"}},
	{"tunnel port", []string{"tunnel", "port"}},
	{"tunnel type", []string{"tunnel", "type"}},
	{"Tunnel options", []string{"tunnel"}},
	{"One-Packet", []string{"one_packet"}},
	{"Zero port", []string{"port"}},
	{"address family", []string{"address"}},
	{"address[:port]", []string{"address"}},
	{"fwmark", []string{"fwmark"}},
}

// atField moves err, ipvsadm's about the rule of entry n, to the line of
// the field it is about, when its message says which.
func atField(err error, h *healthReader, n int) error {
	le, ok := err.(*lineError)
	if !ok {
		return err
	}
	msg, _, _ := strings.Cut(le.Msg, " (as the rule ") // not the rule's own words
	for _, f := range ipvsadmFields {
		if strings.Contains(msg, f.words) {
			le.Line = h.lineOf(n, f.path...)
			break
		}
	}
	return err
}

// typeErrorText says which field of the document holds a value of the
// wrong kind, in the document's terms: the field's path and the kind of
// value it takes.
func typeErrorText(te *json.UnmarshalTypeError) string {
	path := te.Field
	if path == "" {
		path = "the document"
	} else {
		parts := strings.Split(path, ".")
		for i := range parts[:len(parts)-1] {
			if parts[i] == "services" || parts[i] == "destinations" {
				parts[i] += "[]"
			}
		}
		path = strings.Join(parts, ".")
	}
	want := "a value of another kind"
	switch te.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		want = "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := te.Type.Bits()
		want = fmt.Sprintf("an integer from 0 to %d", uint64(1)<<bits-1)
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "true or false"
	case reflect.Slice:
		want = "a list"
	case reflect.Struct, reflect.Map:
		want = "an object"
	case reflect.Pointer:
		switch te.Type.Elem().Kind() {
		case reflect.Struct:
			want = "an object"
		case reflect.Uint16:
			want = "an integer from 0 to 65535"
		}
	}
	got, ok := map[string]string{"string": "a string", "number": "a number", "bool": "true or false",
		"array": "a list", "object": "an object", "null": "null"}[te.Value]
	if !ok {
		got = strings.TrimPrefix(te.Value, "number ")
	}
	msg := fmt.Sprintf("%s must be %s, not %s", path, want, got)
	if want == "a string" && te.Value == "number" {
		msg += " (quote a number meant as text: \"204\")" // YAML reads 204 as a number
	}
	return msg
}

// decodeError is a JSON decoding error of data, a document of type t, as
// a lineError in the document's terms.
func decodeError(name string, data []byte, t reflect.Type, err error) error {
	line, msg := 1, "JSON: "+err.Error()
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case asErr(err, &se):
		line = lineAt(data, se.Offset)
	case asErr(err, &te):
		line, msg = lineAt(data, te.Offset), typeErrorText(te)
	default:
		// Unknown fields carry no offset: find the key.
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			msg = "unknown field " + field + " (/usr/share/doc/lvskit/lvsctl.md lists them)"
			var key string
			if json.Unmarshal([]byte(field), &key) == nil {
				if l := unknownFieldLine(data, t, key); l > 0 {
					line = l
				}
			}
		}
	}
	return &lineError{File: name, Line: line, Msg: msg}
}

func asErr[T error](err error, target *T) bool {
	e, ok := err.(T)
	if ok {
		*target = e
	}
	return ok
}

// parseArgv parses one ipvsadm command line and adds its rule.
func (r *reader) parseArgv(lineNo int, argv []string) error {
	inv, ended := r.p.Parse(argv)
	if ended != nil {
		msg := strings.TrimSpace(ended.Stderr)
		if msg == "" || strings.HasPrefix(msg, "Try `") {
			msg = "not a rule ipvsadm accepts"
		}
		return r.errorf(lineNo, "%s (as the rule %q)", msg, strings.Join(argv[1:], " "))
	}
	return r.add(lineNo, inv)
}

// parseWords parses one rule, w's words after the program name, and
// adds it: with cmdline.ParseFast when it takes them (the rules most
// documents hold, read without a string per word), else with parseArgv,
// whose messages are ipvsadm's. ParseFast fills an invocation as Parse
// would.
func (r *reader) parseWords(lineNo int, w *words) error {
	fields := w.fields()
	if parseFast(fields, &r.fast) {
		return r.add(lineNo, &r.fast)
	}
	return r.parseArgv(lineNo, cmdline.RestoreArgv("ipvsadm", fields))
}

// parseFast is cmdline.ParseFast (tests replace it).
var parseFast = cmdline.ParseFast

// words is an argument vector written into one buffer, reused from rule
// to rule.
type words struct {
	buf  []byte
	ends []int    // where each word ends in buf
	cut  [][]byte // fields' result
}

func (w *words) reset() { w.buf, w.ends = w.buf[:0], w.ends[:0] }

func (w *words) end() { w.ends = append(w.ends, len(w.buf)) }

func (w *words) add(s string) {
	w.buf = append(w.buf, s...)
	w.end()
}

func (w *words) addUint(v uint64) {
	w.buf = strconv.AppendUint(w.buf, v, 10)
	w.end()
}

// addHostPort adds "a:port" ("[a]:port" for IPv6).
func (w *words) addHostPort(a netip.Addr, port uint16) {
	w.buf = netip.AddrPortFrom(a, port).AppendTo(w.buf)
	w.end()
}

// addFrom adds words from to end (not included) of o.
func (w *words) addFrom(o *words, from, end int) {
	for i := from; i < end; i++ {
		start := 0
		if i > 0 {
			start = o.ends[i-1]
		}
		w.buf = append(w.buf, o.buf[start:o.ends[i]]...)
		w.end()
	}
}

// fields returns the words, valid until w changes.
func (w *words) fields() [][]byte {
	w.cut = w.cut[:0]
	start := 0
	for _, end := range w.ends {
		w.cut = append(w.cut, w.buf[start:end:end])
		start = end
	}
	return w.cut
}

// fieldError is an error in the value of one field of an entry.
type fieldError struct {
	field string // its key
	msg   string
}

func (e *fieldError) Error() string { return e.msg }

func fieldErrorf(field, format string, args ...any) error {
	return &fieldError{field: field, msg: fmt.Sprintf(format, args...)}
}

// errorField is the key an error of an entry is about ("" when unknown).
func errorField(err error) string {
	if fe, ok := err.(*fieldError); ok {
		return fe.field
	}
	return ""
}

// appendArgv adds the service's part of an -A rule to w: designator, then
// settings. An error is a *fieldError.
func (js *JSONService) appendArgv(w *words) error {
	switch {
	case js.FWMark != 0:
		if js.Protocol != "" || js.Address != "" || js.Port != nil {
			field := "protocol"
			if js.Protocol == "" {
				field = "address"
				if js.Address == "" {
					field = "port"
				}
			}
			return fieldErrorf(field, "a fwmark service has no protocol, address or port")
		}
		w.add("-f")
		w.addUint(uint64(js.FWMark))
		switch js.Family {
		case "inet6":
			w.add("-6")
		case "inet", "":
		default:
			return fieldErrorf("family", "family %q: inet or inet6", js.Family)
		}
	default:
		addr, err := netip.ParseAddr(js.Address)
		if err != nil || addr.Zone() != "" {
			return fieldErrorf("address", "address %q: not an IP address", js.Address)
		}
		if js.Port == nil {
			return fieldErrorf("address", "address service without port")
		}
		if want := familyName(familyOf(addr)); js.Family != "" && js.Family != want {
			return fieldErrorf("family", "family %q but address %s", js.Family, addr)
		}
		proto, ok := notation.ProtocolNamed(js.Protocol)
		if !ok || js.Protocol != proto.String() {
			return fieldErrorf("protocol", "protocol %q: tcp, udp or sctp", js.Protocol)
		}
		w.add(notation.Protocol(proto).Option)
		w.addHostPort(addr, *js.Port)
	}
	if js.Scheduler != "" {
		w.add("-s")
		w.add(js.Scheduler)
	}
	if p := js.Persistence; p != nil {
		w.add("-p")
		w.addUint(uint64(p.Timeout))
		if p.Netmask != "" {
			w.add("-M")
			w.add(p.Netmask)
		}
	}
	if js.PE != "" {
		w.add("--pe")
		w.add(js.PE)
	}
	if js.OnePacket {
		w.add("-o")
	}
	if len(js.SchedulerFlags) > 0 {
		w.add("-b")
		for i, f := range js.SchedulerFlags {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.buf = append(w.buf, f...)
		}
		w.end()
	}
	return nil
}

// appendArgv adds the destination's part of an -a rule to w. An error is
// a *fieldError.
func (jd *JSONDestination) appendArgv(w *words) error {
	addr, err := netip.ParseAddr(jd.Address)
	if err != nil || addr.Zone() != "" {
		return fieldErrorf("address", "address %q: not an IP address", jd.Address)
	}
	w.add("-r")
	w.addHostPort(addr, jd.Port)
	method := ipvs.FwdRoute
	if jd.Method != "" {
		var ok bool
		method, ok = notation.MethodNamed(jd.Method)
		if !ok || jd.Method != method.String() || method == ipvs.FwdLocal {
			return fieldErrorf("method", "method %q: masq, route or tunnel", jd.Method)
		}
	}
	w.add(notation.Method(method).Option)
	w.add("-w")
	w.buf = strconv.AppendInt(w.buf, jd.Weight, 10)
	w.end()
	if jd.UpperThreshold != 0 {
		w.add("-x")
		w.addUint(uint64(jd.UpperThreshold))
	}
	if jd.LowerThreshold != 0 {
		w.add("-y")
		w.addUint(uint64(jd.LowerThreshold))
	}
	if t := jd.Tunnel; t != nil {
		w.add("--tun-type")
		w.add(t.Type)
		if t.Port != 0 {
			w.add("--tun-port")
			w.addUint(uint64(t.Port))
		}
		if t.Checksum != "" {
			w.buf = append(w.buf, "--tun-"...)
			w.add(t.Checksum)
		}
	}
	return nil
}

func familyOf(a netip.Addr) ipvs.Family {
	if a.Is4() {
		return ipvs.AFInet
	}
	return ipvs.AFInet6
}

// lineTable holds the line of each entry of a document (entryLines), in
// document order; at is 1 past its end.
type lineTable []int

func (t lineTable) at(i int) int {
	if i < len(t) {
		return t[i]
	}
	return 1
}

// stringEnd is the offset just past the JSON string that starts at
// data[start] (a quote), or len(data) when it is not closed.
func stringEnd(data []byte, start int) int {
	for i := start + 1; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data)
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// What namesEntries finds a key to be.
const (
	noEntries   = iota
	entryArray  // services, destinations
	checksArray // checks: entries at the top of a document only
)

// namesEntries says whether quoted, a closed JSON string with its quotes,
// is the key of an array of entries: services, destinations or checks,
// as the decoder reads it (escapes undone, letter case kept).
func namesEntries(quoted []byte) int {
	key := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		var s string
		if json.Unmarshal(quoted, &s) != nil {
			return noEntries
		}
		key = []byte(s)
	}
	switch string(key) { // compared without a copy
	case "services", "destinations":
		return entryArray
	case "checks":
		return checksArray
	}
	return noEntries
}

// versionLine is the line of a document's "version" key, or 1.
func versionLine(data []byte) int {
	if off := skipSpace(data, 0); off < len(data) && data[off] == '{' {
		if k, _ := findKey(data, off, "version"); k >= 0 {
			return lineAt(data, int64(k))
		}
	}
	return 1
}

func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return 1 + bytes.Count(data[:off], []byte{'\n'})
}
