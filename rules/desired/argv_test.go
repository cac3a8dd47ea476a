package desired

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
	"github.com/lvskit/lvskit/ipvsadm/notation"
)

// serviceArgv and destArgv are the string-per-word argument vectors
// appendArgv replaced, kept as its oracle.
func serviceArgv(js *JSONService) ([]string, error) {
	var a []string
	switch {
	case js.FWMark != 0:
		if js.Protocol != "" || js.Address != "" || js.Port != nil {
			return nil, fmt.Errorf("a fwmark service has no protocol, address or port")
		}
		a = append(a, "-f", strconv.FormatUint(uint64(js.FWMark), 10))
		switch js.Family {
		case "inet6":
			a = append(a, "-6")
		case "inet", "":
		default:
			return nil, fmt.Errorf("family %q: inet or inet6", js.Family)
		}
	default:
		addr, err := netip.ParseAddr(js.Address)
		if err != nil || addr.Zone() != "" {
			return nil, fmt.Errorf("address %q: not an IP address", js.Address)
		}
		if js.Port == nil {
			return nil, fmt.Errorf("address service without port")
		}
		if want := familyName(familyOf(addr)); js.Family != "" && js.Family != want {
			return nil, fmt.Errorf("family %q but address %s", js.Family, addr)
		}
		proto, ok := notation.ProtocolNamed(js.Protocol)
		if !ok || js.Protocol != proto.String() {
			return nil, fmt.Errorf("protocol %q: tcp, udp or sctp", js.Protocol)
		}
		a = append(a, notation.Protocol(proto).Option, netip.AddrPortFrom(addr, *js.Port).String())
	}
	if js.Scheduler != "" {
		a = append(a, "-s", js.Scheduler)
	}
	if p := js.Persistence; p != nil {
		a = append(a, "-p", strconv.FormatUint(uint64(p.Timeout), 10))
		if p.Netmask != "" {
			a = append(a, "-M", p.Netmask)
		}
	}
	if js.PE != "" {
		a = append(a, "--pe", js.PE)
	}
	if js.OnePacket {
		a = append(a, "-o")
	}
	if len(js.SchedulerFlags) > 0 {
		a = append(a, "-b", strings.Join(js.SchedulerFlags, ","))
	}
	return a, nil
}

func destArgv(jd *JSONDestination) ([]string, error) {
	addr, err := netip.ParseAddr(jd.Address)
	if err != nil || addr.Zone() != "" {
		return nil, fmt.Errorf("address %q: not an IP address", jd.Address)
	}
	a := []string{"-r", netip.AddrPortFrom(addr, jd.Port).String()}
	method := ipvs.FwdRoute
	if jd.Method != "" {
		var ok bool
		method, ok = notation.MethodNamed(jd.Method)
		if !ok || jd.Method != method.String() || method == ipvs.FwdLocal {
			return nil, fmt.Errorf("method %q: masq, route or tunnel", jd.Method)
		}
	}
	a = append(a, notation.Method(method).Option)
	a = append(a, "-w", strconv.FormatInt(jd.Weight, 10))
	if jd.UpperThreshold != 0 {
		a = append(a, "-x", strconv.FormatUint(uint64(jd.UpperThreshold), 10))
	}
	if jd.LowerThreshold != 0 {
		a = append(a, "-y", strconv.FormatUint(uint64(jd.LowerThreshold), 10))
	}
	if t := jd.Tunnel; t != nil {
		a = append(a, "--tun-type", t.Type)
		if t.Port != 0 {
			a = append(a, "--tun-port", strconv.FormatUint(uint64(t.Port), 10))
		}
		if t.Checksum != "" {
			a = append(a, "--tun-"+t.Checksum)
		}
	}
	return a, nil
}

// argvServices are services, one a document, each with the real servers
// of its kind: valid ones and every error appendArgv and ipvsadm find.
var argvServices = []string{
	`"protocol": "tcp", "address": "10.0.0.1", "port": 80, "scheduler": "wrr"`,
	`"protocol": "udp", "address": "10.0.0.1", "port": 53, "family": "inet", "scheduler": "rr", "persistence": {"timeout": 300, "netmask": "255.255.255.0"}`,
	`"protocol": "sctp", "address": "2001:db8::1", "port": 80, "scheduler": "mh", "scheduler_flags": ["mh-fallback", "mh-port"], "one_packet": true`,
	`"protocol": "tcp", "address": "2001:db8::1", "port": 443, "family": "inet6", "persistence": {"timeout": 60, "netmask": "64"}`,
	`"protocol": "tcp", "address": "::ffff:10.0.0.1", "port": 80`,
	`"protocol": "udp", "address": "10.0.0.1", "port": 5060, "scheduler": "rr", "pe": "sip", "persistence": {"timeout": 60}`,
	`"fwmark": 7, "scheduler": "sh", "scheduler_flags": ["sh-port"]`,
	`"fwmark": 7, "family": "inet6", "scheduler": "rr"`,
	`"fwmark": 4294967295, "family": "inet"`,
	`"protocol": "tcp", "address": "10.0.0.1", "port": 0`,
	`"protocol": "tcp", "address": "10.0.0.1", "port": 0, "persistence": {"timeout": 0}`,
	`"protocol": "tcp", "address": "10.0.0.1", "port": 80, "persistence": {"timeout": 10, "netmask": "255.0.255.0"}`,
	`"protocol": "tcp", "address": "10.0.0.1", "port": 80, "scheduler": "WRR"`,
	`"protocol": "tcp", "address": "10.0.0.1", "port": 80, "scheduler": "w rr"`,
	`"protocol": "tcp", "address": "10.0.0.1", "port": 80, "scheduler": "averyveryverylongschedulername"`,
	`"protocol": "tcp", "address": "10.0.0.1", "port": 80, "scheduler": "-p"`,
	`"protocol": "tcp", "address": "10.0.0.1", "port": 80, "scheduler_flags": ["flag-1", ""]`,
	`"protocol": "tcp", "address": "10.0.0.1"`,
	`"protocol": "TCP", "address": "10.0.0.1", "port": 80`,
	`"protocol": "icmp", "address": "10.0.0.1", "port": 80`,
	`"protocol": "tcp", "address": "fe80::1%eth0", "port": 80`,
	`"protocol": "tcp", "address": "example.com", "port": 80`,
	`"protocol": "tcp", "address": "010.0.0.1", "port": 80`,
	`"protocol": "tcp", "address": "10.0.0.1", "port": 80, "family": "inet6"`,
	`"fwmark": 7, "address": "10.0.0.1"`,
	`"fwmark": 7, "family": "ipx"`,
}

var argvDests = []string{
	`{"address": "192.168.1.2", "port": 80, "method": "masq", "weight": 3, "upper_threshold": 100, "lower_threshold": 10}`,
	`{"address": "192.168.1.3", "port": 0, "method": "route", "weight": 0}`,
	`{"address": "192.168.1.4", "port": 8080}`,
	`{"address": "2001:db8:1::3", "port": 53, "method": "tunnel", "weight": 1, "tunnel": {"type": "gue", "port": 6080, "checksum": "remcsum"}}`,
	`{"address": "2001:db8:1::2", "port": 53, "method": "tunnel", "weight": 1, "tunnel": {"type": "gre", "checksum": "csum"}}`,
	`{"address": "192.168.1.5", "port": 80, "method": "tunnel", "tunnel": {"type": "ipip"}}`,
	`{"address": "::ffff:192.168.1.6", "port": 80, "method": "masq"}`,
	`{"address": "192.168.1.7", "port": 80, "weight": -1}`,
	`{"address": "192.168.1.8", "port": 80, "weight": 65536}`,
	`{"address": "192.168.1.9", "port": 80, "weight": 2147483648}`,
	`{"address": "192.168.1.10", "port": 80, "method": "local"}`,
	`{"address": "192.168.1.11", "port": 80, "method": "MASQ"}`,
	`{"address": "192.168.1.12", "port": 80, "tunnel": {"type": "vxlan", "checksum": "no"}}`,
	`{"address": "host", "port": 80}`,
	`{"address": "fe80::2%eth0", "port": 80}`,
	`{"address": "192.168.1.2", "port": 80}`,
}

// TestArgvWordsLikeStrings: appendArgv writes the words, and returns
// the errors, the string-per-word vectors had.
func TestArgvWordsLikeStrings(t *testing.T) {
	for _, s := range argvServices {
		var js JSONService
		if err := json.Unmarshal([]byte("{"+s+"}"), &js); err != nil {
			t.Fatal(err)
		}
		var w words
		w.add("-A")
		err := js.appendArgv(&w)
		want, wantErr := serviceArgv(&js)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || err == nil && !slices.Equal(cmdline.RestoreArgv("ipvsadm", w.fields()), append([]string{"ipvsadm", "-A"}, want...)) {
			t.Errorf("%s: words %q (error %v), want %q (error %v)", s, w.fields(), err, want, wantErr)
		}
		for _, d := range argvDests {
			var jd JSONDestination
			if err := json.Unmarshal([]byte(d), &jd); err != nil {
				t.Fatal(err)
			}
			var dw words
			dw.add("-a")
			err := jd.appendArgv(&dw)
			want, wantErr := destArgv(&jd)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || err == nil && !slices.Equal(cmdline.RestoreArgv("ipvsadm", dw.fields()), append([]string{"ipvsadm", "-a"}, want...)) {
				t.Errorf("%s: words %q (error %v), want %q (error %v)", d, dw.fields(), err, want, wantErr)
			}
		}
	}
}

// TestReadJSONFastLikeParse: a document reads as the same rules, with
// the same errors, whether cmdline.ParseFast or Parse reads its rules.
func TestReadJSONFastLikeParse(t *testing.T) {
	var docs []string
	for _, s := range argvServices {
		for _, d := range argvDests {
			docs = append(docs, fmt.Sprintf("{\"version\": 1, \"services\": [\n{%s,\n \"destinations\": [\n%s]}]}", s, d))
		}
		docs = append(docs, fmt.Sprintf("{\"version\": 1, \"services\": [\n{%s,\n \"destinations\": [\n%s]}]}", s, strings.Join(argvDests[:6], ",\n")))
	}
	set, err := ReadText("rich", []byte(rich), nil)
	if err != nil {
		t.Fatal(err)
	}
	var written bytes.Buffer
	if err := WriteJSON(&written, set, Counters{}); err != nil {
		t.Fatal(err)
	}
	docs = append(docs, written.String(), string(benchJSON(30, 4)))
	defer func() { parseFast = cmdline.ParseFast }()
	took, valid := 0, 0
	for _, doc := range docs {
		parseFast = func(fields [][]byte, inv *cmdline.Invocation) bool {
			ok := cmdline.ParseFast(fields, inv)
			if ok {
				took++
			}
			return ok
		}
		got, gotErr := ReadJSON("f", []byte(doc), nil)
		parseFast = func([][]byte, *cmdline.Invocation) bool { return false }
		want, wantErr := ReadJSON("f", []byte(doc), nil)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nread %+v (error %v)\nwant %+v (error %v)", doc, got, gotErr, want, wantErr)
		}
		if gotErr == nil {
			valid++
		}
	}
	if valid < len(docs)/4 || took < 200 {
		t.Errorf("%d of %d documents read without error, ParseFast took %d rules: too few to test with", valid, len(docs), took)
	}
}
