package desired

import (
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/rules"
)

const healthYAML = `# The web pool, checked by HTTP; one server by TCP only.
version: 2
services:
  - protocol: tcp
    address: 10.0.0.1
    port: 80
    scheduler: wrr
    check: {type: http, path: /healthz, interval: 3s, fall: 2}
    when_all_down: sorry
    sorry_server: 192.168.9.9:80
    destinations:
      - {address: 192.168.1.1, port: 80, method: masq, weight: 3}
      - address: 192.168.1.2   # an older box
        port: 80
        method: masq
        weight: 1
        check:
          type: tcp
  - fwmark: 7
    family: inet
    scheduler: rr
    destinations:
      - {address: 192.168.1.3, port: 0, method: route, weight: 1}
`

// TestYAMLWithChecks: a version 2 YAML document reads as the same rule set
// as its JSON, with the service's check on each real server but the one
// that has its own, and the service's all-down settings.
func TestYAMLWithChecks(t *testing.T) {
	set, h, err := Read("pool.yaml", strings.NewReader(healthYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := Read("pool.rules", strings.NewReader(
		"-A -t 10.0.0.1:80 -s wrr\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 3\n-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 1\n"+
			"-A -f 7 -s rr\n-a -f 7 -r 192.168.1.3:0 -g -w 1\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := rules.Diff(text, set, rules.DiffOptions{}); !d.InSync() {
		t.Errorf("YAML and rules text differ: %+v", d.Changes)
	}
	if h == nil || len(h.Checks) != 2 {
		t.Fatalf("health %+v, want 2 checks", h)
	}
	svc := rules.KeyOf(&set.Services[0].Service)
	for _, s := range set.Services {
		if s.FWMark == 0 {
			svc = rules.KeyOf(&s.Service)
		}
	}
	for addr, want := range map[string]string{"192.168.1.1": "http", "192.168.1.2": "tcp"} {
		var ref DestRef
		for r := range h.Checks {
			if r.Dest.Addr.String() == addr {
				ref = r
			}
		}
		cs, ok := h.Checks[ref]
		if !ok || len(cs) != 1 {
			t.Fatalf("%v: checks %v, want one", ref, cs)
		}
		c := cs[0]
		if !ok || ref.Service != svc || c.Type != want {
			t.Errorf("%s: check %+v (found %v), want type %s", addr, c, ok, want)
		}
		if want == "http" && (c.Path != "/healthz" || c.Interval != "3s" || c.Fall != 2 || c.Rise != 2) {
			t.Errorf("%s: check %+v, want the service's with defaults", addr, c)
		}
	}
	sh := h.Services[svc]
	if sh.WhenAllDown != Sorry || sh.SorryServer.String() != "192.168.9.9:80" {
		t.Errorf("service health %+v", sh)
	}
}

// TestURLsAndDynamicRead: a check's urls, with their digests, and an exec
// check's dynamic read into the spec; each url gains the default expect.
func TestURLsAndDynamicRead(t *testing.T) {
	healthSystem = health.System{Stat: func(string) (health.FileInfo, error) { return health.FileInfo{Mode: 0o755}, nil },
		LookupUser: func(string) (uint32, uint32, error) { return 65534, 65534, nil }}
	defer func() { healthSystem = health.System{} }()
	_, h, err := Read("urls.yaml", strings.NewReader(urlsYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sawHTTP, sawExec bool
	for _, cs := range h.Checks {
		c := cs[0]
		switch c.Type {
		case "http":
			sawHTTP = true
			want := []health.URL{{Path: "/index.html", Expect: health.DefaultExpect, Digest: []string{"9b3a0c85a887a256d6939da88aadd8cd"}},
				{Path: "/healthz", Expect: "200"}}
			if c.Path != "" || c.Expect != "" || !reflect.DeepEqual(c.URLs, want) {
				t.Errorf("http check %+v, want urls %+v and no path or expect", c, want)
			}
		case "exec":
			sawExec = true
			if !c.Dynamic {
				t.Errorf("exec check %+v, want dynamic", c)
			}
		}
	}
	if !sawHTTP || !sawExec {
		t.Errorf("checks %v: want an http and an exec check", h.Checks)
	}
}

// TestHealthErrorsNameTheLine: a bad check, all-down setting or YAML is an
// error with the file, the line and the field's path.
func TestHealthErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{strings.Replace(healthYAML, "interval: 3s", "interval: 3x", 1), "pool.yaml:8: services[0].check: interval"},
		{strings.Replace(healthYAML, "type: tcp", "type: ftp", 1), "pool.yaml:18: services[0].destinations[1].check: type \"ftp\""},
		{strings.Replace(healthYAML, "when_all_down: sorry", "when_all_down: panic", 1), "pool.yaml:9: services[0].when_all_down \"panic\": keep, sorry or zero"},
		{strings.Replace(healthYAML, "    sorry_server: 192.168.9.9:80\n", "", 1), "services[0].sorry_server \"\": an address:port is needed"},
		{strings.Replace(healthYAML, "version: 2", "version: 1", 1), "pool.yaml:8: services[0].check needs \"version\": 2"},
		{strings.Replace(healthYAML, "        method: masq\n        weight: 1", "        method: masq\n        wieght: 1", 1), "pool.yaml:16: unknown field \"wieght\""},
		{strings.Replace(healthYAML, "port: 80\n    scheduler", "port: eighty\n    scheduler", 1), "pool.yaml:6: services[].port must be an integer from 0 to 65535, not a string"},
		{"version: 2\nservices:\n  - protocol: tcp\n   address: x\n", "pool.yaml:4: YAML: did not find expected"},
	} {
		_, _, err := Read("pool.yaml", strings.NewReader(tc.doc), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// smtpPingYAML has an smtp check on one real server and a ping check on
// another.
const smtpPingYAML = `version: 2
services:
  - protocol: tcp
    address: 10.0.0.1
    port: 25
    scheduler: rr
    destinations:
      - address: 192.168.1.1
        port: 25
        method: route
        weight: 1
        check: {type: smtp, helo: lb1.example.com, port: 587}
      - address: 192.168.1.2
        port: 25
        method: route
        weight: 1
        check:
          type: ping
          timeout: 500ms
`

// TestSMTPAndPingRead: smtp and ping checks read with their fields, and
// a field they do not take is an error naming its line.
func TestSMTPAndPingRead(t *testing.T) {
	_, h, err := Read("mx.yaml", strings.NewReader(smtpPingYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for r, cs := range h.Checks {
		c := cs[0]
		got[r.Dest.Addr.String()] = c.Type + " " + c.Helo + " " + c.Timeout + " " + strconv.Itoa(c.Port)
	}
	want := map[string]string{"192.168.1.1": "smtp lb1.example.com 1s 587", "192.168.1.2": "ping  500ms 0"}
	if !maps.Equal(got, want) {
		t.Errorf("checks %q, want %q", got, want)
	}
	for _, tc := range []struct{ old, new, want string }{
		{"helo: lb1.example.com", "helo: \"a\\r\\nRSET\"", `mx.yaml:12: services[0].destinations[0].check: helo "a\r\nRSET": holds a control character`},
		{"          timeout: 500ms", "          via: vip", "mx.yaml:19: services[0].destinations[1].check: via vip: not for ping checks"},
		{"          timeout: 500ms", "          port: 7", "mx.yaml:19: services[0].destinations[1].check: port: not for ping checks"},
		{"type: smtp,", "type: tcp,", "mx.yaml:12: services[0].destinations[0].check: helo: not for tcp checks (only smtp)"},
	} {
		_, _, err := Read("mx.yaml", strings.NewReader(strings.Replace(smtpPingYAML, tc.old, tc.new, 1)), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.new, err, tc.want)
		}
	}
}

// TestRulesTextIsNotYAML: rules text, with comments or the ipvsadm word,
// is never taken for YAML.
func TestRulesTextIsNotYAML(t *testing.T) {
	for doc, want := range map[string]bool{
		"# saved\n-A -t 10.0.0.1:80 -s rr\n":           false,
		"ipvsadm -A -t 10.0.0.1:80 -s rr\n":            false,
		"\n\n-a -t 10.0.0.1:80 -r 10.0.0.2:80\n":       false,
		"# a pool\nversion: 2\nservices: []\n":         true,
		"---\nversion: 2\n":                            true,
		"services:\n  - {protocol: tcp}\nversion: 2\n": true,
	} {
		if got := isYAML([]byte(doc)); got != want {
			t.Errorf("isYAML(%q) = %v, want %v", doc, got, want)
		}
	}
}

// TestChecksFileForRulesText: a checks file names services as ipvsadm
// -Sn writes them and gives a real server its own check; naming a service
// or real server the rules lack is an error with the line.
func TestChecksFileForRulesText(t *testing.T) {
	set, _, err := Read("rules", strings.NewReader("-A -t 10.0.0.1:80 -s wrr\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -g -w 3\n"+
		"-a -t 10.0.0.1:80 -r 192.168.1.2:80 -g -w 1\n-A -f 7 -6 -s rr\n-a -f 7 -6 -r [2001:db8::2]:0 -g -w 1\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := `version: 2
checks:
  - service: -t 10.0.0.1:80
    check: {type: tcp, via: vip}
    destinations:
      - {address: 192.168.1.2, port: 80, check: {type: http, path: /ok}}
  - service: "-f  7 -6"
    check: {type: tcp, port: 443}
`
	h, err := ReadChecks("checks.yaml", []byte(checks), set)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for ref, cs := range h.Checks {
		c := cs[0]
		got[ref.Service.String()+" "+ref.Dest.String()] = c.Type + " " + c.Via
	}
	want := map[string]string{"-t 10.0.0.1:80 192.168.1.1:80": "tcp vip", "-t 10.0.0.1:80 192.168.1.2:80": "http ",
		"-f 7 -6 [2001:db8::2]:0": "tcp "}
	if len(got) != len(want) {
		t.Errorf("checks %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	for _, tc := range []struct{ doc, want string }{
		{strings.Replace(checks, "-t 10.0.0.1:80", "-t 10.0.0.9:80", 1), "checks.yaml:3: checks[0].service \"-t 10.0.0.9:80\": no such service"},
		{strings.Replace(checks, "192.168.1.2, port: 80", "192.168.1.7, port: 80", 1), "checks.yaml:6: checks[0].destinations[0]: 192.168.1.7 port 80 is no real server"},
		{strings.Replace(checks, "version: 2", "version: 1", 1), "checks.yaml:1: a checks file has \"version\": 2"},
	} {
		if _, err := ReadChecks("checks.yaml", []byte(tc.doc), set); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
