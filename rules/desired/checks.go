package desired

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/rules"
)

// checksDocument adds health checks to a rule set read from rules text,
// which has no place for them (lvsctl run --checks). Each entry names a
// service as ipvsadm -Sn writes it ("-t 10.0.0.1:80", "-f 7 -6") and gives
// it what a version 2 service has; a real server's own check is given by
// address and port.
type checksDocument struct {
	Version int `json:"version"`
	Checks  []struct {
		Service      string        `json:"service"`
		Check        *health.Spec  `json:"check"`
		Checks       []health.Spec `json:"checks"`
		WhenAllDown  string        `json:"when_all_down"`
		SorryServer  string        `json:"sorry_server"`
		Destinations []struct {
			Address string        `json:"address"`
			Port    uint16        `json:"port"`
			Check   *health.Spec  `json:"check"`
			Checks  []health.Spec `json:"checks"`
		} `json:"destinations"`
	} `json:"checks"`
}

// ReadChecks reads a checks document (JSON or YAML) for set, whose
// services and real servers it names; naming one set lacks is an error.
func ReadChecks(name string, data []byte, set *rules.Set) (*Health, error) {
	var lines lineTable // found by yamlToJSON, else below
	if isYAML(data) {
		var err error
		if data, lines, err = yamlToJSON(data, nil); err != nil {
			if le, ok := err.(*lineError); ok {
				le.File = name
			}
			return nil, err
		}
	}
	var doc checksDocument
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, decodeError(name, data, reflect.TypeFor[checksDocument](), err)
	}
	if lines == nil {
		var err error
		if lines, err = checkJSON(data); err != nil {
			err.(*lineError).File = name
			return nil, err
		}
	}
	if doc.Version != HealthVersion {
		return nil, &lineError{File: name, Line: versionLine(data), Msg: fmt.Sprintf("a checks file has \"version\": %d", HealthVersion)}
	}
	services := map[string]*rules.Service{}
	for i := range set.Services {
		s := &set.Services[i]
		services[rules.KeyOf(&s.Service).String()] = s
	}
	hr := newHealth(name, HealthVersion, data, lines)
	n := 0
	// An own check, and the entry that gives it.
	type ownCheck struct {
		jd JSONDestination
		n  int
	}
	for i, c := range doc.Checks {
		svcN := n
		line := lines.at(n)
		n++
		svc, ok := services[strings.Join(strings.Fields(c.Service), " ")]
		if !ok {
			return nil, hr.errorf(hr.lineOf(svcN, "service"), "checks[%d].service %q: no such service in the rules (write it as ipvsadm -Sn does)", i, c.Service)
		}
		key := rules.KeyOf(&svc.Service)
		js := &JSONService{Check: c.Check, Checks: c.Checks, WhenAllDown: c.WhenAllDown, SorryServer: c.SorryServer}
		if err := hr.service(svcN, i, key, js); err != nil {
			return nil, err
		}
		own := map[rules.DestKey]*ownCheck{}
		for j, d := range c.Destinations {
			dk, ok := findDest(svc, d.Address, d.Port)
			if !ok {
				return nil, hr.errorf(lines.at(n), "checks[%d].destinations[%d]: %s port %d is no real server of %s", i, j, d.Address, d.Port, key)
			}
			own[dk] = &ownCheck{JSONDestination{Check: d.Check, Checks: d.Checks}, n}
			n++
		}
		for j := range svc.Dests {
			dk := rules.DestKeyOf(&svc.Dests[j].Destination)
			jd, dn := &JSONDestination{}, svcN
			if o := own[dk]; o != nil {
				jd, dn = &o.jd, o.n
			}
			if err := hr.dest(line, dn, i, j, key, dk, js, jd); err != nil {
				return nil, err
			}
		}
	}
	return hr.result(), nil
}

// findDest is the key of svc's real server at address and port.
func findDest(svc *rules.Service, address string, port uint16) (rules.DestKey, bool) {
	a, err := netip.ParseAddr(address)
	if err != nil {
		return rules.DestKey{}, false
	}
	for i := range svc.Dests {
		k := rules.DestKeyOf(&svc.Dests[i].Destination)
		if k.Addr == a.Unmap() && k.Port == port {
			return k, true
		}
	}
	return rules.DestKey{}, false
}
