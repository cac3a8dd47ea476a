package desired

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/lvskit/lvskit/rules"
)

// What a director announces when every real server of a VIP has failed.
const (
	// Withdraw stops announcing the VIP: the router sends its traffic to
	// the directors that still announce it. The default.
	Withdraw = "withdraw"
	// KeepAnnouncing goes on announcing it, so that the servers its
	// services keep (when_all_down keep) or their sorry servers answer.
	KeepAnnouncing = "keep"
)

// DefaultAnnounceDevice is the announcing device when the document names
// none.
const DefaultAnnounceDevice = "lvs-announce"

// Announce is what a desired state says about announcing its VIPs to a
// routing daemon (document version 2, "announce"): nothing is announced
// without it.
type Announce struct {
	// Device is the device whose addresses the routing daemon exports
	// (DefaultAnnounceDevice when the document names none).
	Device string
	// WhenAllDown is Withdraw or KeepAnnouncing.
	WhenAllDown string
	// Prefixes gives each announced service the prefix it counts for: its
	// address as a host prefix, or the prefix the service names (the only
	// way for a firewall-mark service). A prefix is announced while one of
	// its services has a real server in service.
	Prefixes map[rules.ServiceKey]netip.Prefix
}

// jsonAnnounce is the document's "announce" object.
type jsonAnnounce struct {
	Device      string `json:"device,omitempty"`
	WhenAllDown string `json:"when_all_down,omitempty"`
}

// announceField is a service's "announce": true or absent (its address,
// when the document announces), false (never), or a prefix.
type announceField struct {
	Off    bool
	Prefix string
}

// UnmarshalJSON reads true, false or a prefix string.
func (a *announceField) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true":
		*a = announceField{}
		return nil
	case "false":
		*a = announceField{Off: true}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("announce: true, false or a prefix such as \"203.0.113.0/28\"")
	}
	*a = announceField{Prefix: s}
	return nil
}

// MarshalJSON writes what UnmarshalJSON reads.
func (a announceField) MarshalJSON() ([]byte, error) {
	switch {
	case a.Off:
		return []byte("false"), nil
	case a.Prefix != "":
		return json.Marshal(a.Prefix)
	}
	return []byte("true"), nil
}

// announceDoc reads the document's "announce" object; nil without one.
func (hr *healthReader) announceDoc(ja *jsonAnnounce) error {
	if ja == nil {
		return nil
	}
	if err := hr.needVersion(0, "announce", "announce"); err != nil {
		return err
	}
	line := func(key string) int {
		if l := topFieldLine(hr.data, "announce", key); l > 0 {
			return l
		}
		return versionLine(hr.data)
	}
	a := &Announce{Device: ja.Device, WhenAllDown: Withdraw, Prefixes: map[rules.ServiceKey]netip.Prefix{}}
	if a.Device == "" {
		a.Device = DefaultAnnounceDevice
	}
	if len(a.Device) > 12 || !validIfName(a.Device) {
		return hr.errorf(line("device"), "announce.device %q: a device name of 1 to 12 letters, digits, '-' or '_'", ja.Device)
	}
	switch ja.WhenAllDown {
	case "", Withdraw:
	case KeepAnnouncing:
		a.WhenAllDown = KeepAnnouncing
	default:
		return hr.errorf(line("when_all_down"), "announce.when_all_down %q: withdraw or keep", ja.WhenAllDown)
	}
	hr.h.Announce = a
	return nil
}

func validIfName(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return s != ""
}

// announceService gives the i-th service, written in entry n, its prefix
// when the document announces.
func (hr *healthReader) announceService(n, i int, key rules.ServiceKey, svc *rules.Service, js *JSONService) error {
	path := fmt.Sprintf("services[%d].announce", i)
	a := hr.h.Announce
	if a == nil {
		if js.Announce != nil && !js.Announce.Off {
			return hr.errorf(hr.lineOf(n, "announce"), "%s: the document has no \"announce\" object, which turns announcing on", path)
		}
		return nil
	}
	switch f := js.Announce; {
	case f != nil && f.Off:
	case f != nil && f.Prefix != "":
		p, err := netip.ParsePrefix(f.Prefix)
		if err != nil || p.Masked() != p {
			return hr.errorf(hr.lineOf(n, "announce"), "%s %q: a prefix such as \"203.0.113.0/28\", its host bits 0", path, f.Prefix)
		}
		if svc.FWMark == 0 && !p.Contains(svc.Addr) {
			return hr.errorf(hr.lineOf(n, "announce"), "%s %s does not hold the service's address %s", path, p, svc.Addr)
		}
		a.Prefixes[key] = p
	case svc.FWMark != 0:
		// A firewall-mark service has no address of its own: it is
		// announced only under a prefix it names.
	default:
		a.Prefixes[key] = netip.PrefixFrom(svc.Addr, svc.Addr.BitLen())
	}
	return nil
}

// topFieldLine is the line of key within the document's top-level object
// named obj (of obj itself when key is not in it); 0 when obj is not there.
// For the messages of a failed read only.
func topFieldLine(data []byte, obj, key string) int {
	off := skipSpace(data, 0)
	if off >= len(data) || data[off] != '{' {
		return 0
	}
	k, v := findKey(data, off, obj)
	if k < 0 {
		return 0
	}
	if v < len(data) && data[v] == '{' {
		if kk, _ := findKey(data, v, key); kk >= 0 {
			return lineAt(data, int64(kk))
		}
	}
	return lineAt(data, int64(k))
}
