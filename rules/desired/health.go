package desired

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/rules"
)

// Health is what a desired state says about health checks (document
// version 2, or a checks file): each checked real server's check, and what
// each service does when all its checked real servers fail.
type Health struct {
	// Checks holds the checks of every real server that has any: its own,
	// else its service's, in the order written; the server is in service
	// only while all of them pass. They are validated, with defaults filled
	// in but Via, which stays as written (empty: vip for direct-routing and
	// tunnelled real servers, direct for masquerading ones). Real servers
	// with the same checks share one slice and its Specs, which no one
	// changes. A single "check" is a list of one.
	Checks map[DestRef][]*health.Spec
	// Services holds the settings of services that have checks.
	Services map[rules.ServiceKey]ServiceHealth
	// Announce is what the document announces, nil when it does not.
	Announce *Announce
}

// DestRef names a real server of a service.
type DestRef struct {
	Service rules.ServiceKey
	Dest    rules.DestKey
}

// What a service does when every real server it checks has failed.
const (
	// KeepLast keeps the last real servers in service (fail open): a cause
	// they share, such as the director's own path to them, would otherwise
	// take the whole service down. The default.
	KeepLast = "keep"
	// Sorry puts every real server at weight 0 and sends new connections
	// to the service's sorry server.
	Sorry = "sorry"
	// Zero puts every real server at weight 0: new connections are refused.
	Zero = "zero"
)

// ServiceHealth is a service's settings for when every real server fails.
type ServiceHealth struct {
	WhenAllDown string         // KeepLast, Sorry or Zero
	SorryServer netip.AddrPort // with Sorry
	Source      rules.Source   // where the service was written
}

// healthReader gathers a document's health settings as its services and
// real servers are read.
type healthReader struct {
	name    string
	version int
	sys     health.System
	h       Health
	// svcHint and destHint size the maps at their first entry: how many
	// services and real servers the document has.
	svcHint, destHint int
	// spec, the first check as written, names the checks of the last real
	// server read, which withDefaults holds with their defaults: mostly
	// its service's, those of the next ones too.
	spec         *health.Spec
	withDefaults []*health.Spec
	// data is the document's JSON and lines its entry lines, for the
	// lines of the fields an error is about.
	data  []byte
	lines lineTable
}

func newHealth(name string, version int, data []byte, lines lineTable) *healthReader {
	return &healthReader{name: name, version: version, sys: healthSystem, data: data, lines: lines,
		h: Health{Checks: map[DestRef][]*health.Spec{}, Services: map[rules.ServiceKey]ServiceHealth{}}}
}

// sizeHint says how many services and real servers the document has.
// The maps are made that large at their first entry, not grown and
// rehashed entry by entry, nor made for a document without checks.
func (hr *healthReader) sizeHint(services, dests int) {
	hr.svcHint, hr.destHint = services, dests
}

// healthSystem is what exec checks' programs are checked against (tests
// replace it).
var healthSystem health.System

func (hr *healthReader) errorf(line int, format string, args ...any) error {
	return &lineError{File: hr.name, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// lineOf is the line of the key at path within entry n of the document
// (see fieldLine), else the entry's. It reads the document from its
// start: for the messages of a failed read only.
func (hr *healthReader) lineOf(n int, path ...string) int {
	if len(path) > 0 && path[0] != "" {
		if l := fieldLine(hr.data, n, path...); l > 0 {
			return l
		}
	}
	return hr.lines.at(n)
}

// needVersion refuses a health field, key of entry n, in a version 1
// document.
func (hr *healthReader) needVersion(n int, key, path string) error {
	if hr.version < HealthVersion {
		return hr.errorf(hr.lineOf(n, key), "%s needs \"version\": %d", path, HealthVersion)
	}
	return nil
}

// service reads the i-th service's health settings, written in entry n.
func (hr *healthReader) service(n, i int, key rules.ServiceKey, js *JSONService) error {
	if js.Check == nil && js.Checks == nil && js.WhenAllDown == "" && js.SorryServer == "" {
		return nil
	}
	path := fmt.Sprintf("services[%d]", i)
	given := "check" // the first health field given
	switch {
	case js.Check != nil:
	case js.Checks != nil:
		given = "checks"
	case js.WhenAllDown != "":
		given = "when_all_down"
	default:
		given = "sorry_server"
	}
	if err := hr.needVersion(n, given, path+"."+given); err != nil {
		return err
	}
	if err := hr.checks(n, path, js.Check, js.Checks); err != nil {
		return err
	}
	sh := ServiceHealth{WhenAllDown: KeepLast, Source: rules.Source{File: hr.name, Line: hr.lines.at(n)}}
	switch js.WhenAllDown {
	case "", KeepLast:
	case Zero:
		sh.WhenAllDown = Zero
	case Sorry:
		sh.WhenAllDown = Sorry
		ap, err := netip.ParseAddrPort(js.SorryServer)
		if err != nil {
			line := hr.lineOf(n, "when_all_down")
			if js.SorryServer != "" {
				line = hr.lineOf(n, "sorry_server")
			}
			return hr.errorf(line, "%s.sorry_server %q: an address:port is needed with when_all_down sorry", path, js.SorryServer)
		}
		sh.SorryServer = ap
	default:
		return hr.errorf(hr.lineOf(n, "when_all_down"), "%s.when_all_down %q: keep, sorry or zero", path, js.WhenAllDown)
	}
	if js.SorryServer != "" && sh.WhenAllDown != Sorry {
		return hr.errorf(hr.lineOf(n, "sorry_server"), "%s.sorry_server is used only with when_all_down sorry", path)
	}
	hr.addService(key, sh)
	return nil
}

// addService sets a service's settings.
func (hr *healthReader) addService(key rules.ServiceKey, sh ServiceHealth) {
	if len(hr.h.Services) == 0 && hr.svcHint > 0 {
		hr.h.Services = make(map[rules.ServiceKey]ServiceHealth, hr.svcHint)
	}
	hr.h.Services[key] = sh
}

// dest reads the j-th real server of the i-th service: its own check or
// checks, written in entry n, or the service's. line is where the real
// server was written.
func (hr *healthReader) dest(line, n, i, j int, svc rules.ServiceKey, dest rules.DestKey, js *JSONService, jd *JSONDestination) error {
	one, many := js.Check, js.Checks
	if jd.Check != nil || jd.Checks != nil {
		path := fmt.Sprintf("services[%d].destinations[%d]", i, j)
		key := "check"
		if jd.Check == nil {
			key = "checks"
		}
		if err := hr.needVersion(n, key, path+"."+key); err != nil {
			return err
		}
		if err := hr.checks(n, path, jd.Check, jd.Checks); err != nil {
			return err
		}
		one, many = jd.Check, jd.Checks
	}
	first := one
	if first == nil && len(many) > 0 {
		first = &many[0]
	}
	if first == nil {
		return nil
	}
	if first != hr.spec {
		// The real servers of a service share its checks: one slice, and
		// one Spec each, worked out once.
		if one != nil {
			many = []health.Spec{*one}
		}
		hr.spec, hr.withDefaults = first, make([]*health.Spec, len(many))
		for k := range many {
			d := many[k].WithDefaults()
			d.Via = many[k].Via // empty: the real server's forwarding method decides
			hr.withDefaults[k] = &d
		}
	}
	if len(hr.h.Checks) == 0 && hr.destHint > 0 {
		hr.h.Checks = make(map[DestRef][]*health.Spec, hr.destHint)
	}
	hr.h.Checks[DestRef{svc, dest}] = hr.withDefaults
	if _, ok := hr.h.Services[svc]; !ok {
		hr.addService(svc, ServiceHealth{WhenAllDown: KeepLast, Source: rules.Source{File: hr.name, Line: line}})
	}
	return nil
}

// checks validates the check, or the checks, that entry n gives at path
// ("services[0]"): not both, and not an empty list. An error names the
// line of the field it is about, else of the "check" or "checks" key.
func (hr *healthReader) checks(n int, path string, one *health.Spec, many []health.Spec) error {
	if one != nil && many != nil {
		return hr.errorf(hr.lineOf(n, "checks"), "%s: check and checks: give one of them (checks for several that must all pass)", path)
	}
	if one != nil {
		return hr.check(n, path+".check", []string{"check"}, one)
	}
	if many != nil && len(many) == 0 {
		return hr.errorf(hr.lineOf(n, "checks"), "%s.checks: empty; give at least one check", path)
	}
	for k := range many {
		idx := fmt.Sprintf("[%d]", k)
		if err := hr.check(n, path+".checks"+idx, []string{"checks", idx}, &many[k]); err != nil {
			return err
		}
	}
	return nil
}

// check validates one check object of entry n, found at key within the
// entry. An error names the line of the field it is about, else of key.
func (hr *healthReader) check(n int, path string, key []string, s *health.Spec) error {
	if err := s.WithDefaults().ValidateWith(hr.sys); err != nil {
		return hr.errorf(hr.lineOf(n, append(key, checkField(err)...)...), "%s: %v", path, err)
	}
	return nil
}

// checkField is the path of the field a check's error is about: health's
// messages start with it ("interval \"2x\": ...", "type: missing",
// "urls[1].digest[0] ...": urls, [1], digest, [0]).
func checkField(err error) []string {
	msg := err.Error()
	i := strings.IndexAny(msg, " :")
	if i <= 0 {
		return nil
	}
	var path []string
	for part := range strings.SplitSeq(msg[:i], ".") {
		name, idx, ok := strings.Cut(part, "[")
		path = append(path, name)
		if ok {
			path = append(path, "["+idx)
		}
	}
	return path
}

// result is the health the document holds, nil when it has none.
func (hr *healthReader) result() *Health {
	if len(hr.h.Checks) == 0 && len(hr.h.Services) == 0 && hr.h.Announce == nil {
		return nil
	}
	return &hr.h
}
