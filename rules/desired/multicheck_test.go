package desired

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

const multiYAML = `version: 2
services:
  - protocol: tcp
    address: 10.0.0.1
    port: 443
    scheduler: wrr
    checks:
      - {type: tcp}
      - type: https
        path: /healthz
        tls_skip_verify: true
    destinations:
      - {address: 192.168.1.1, port: 443, method: masq, weight: 3}
      - address: 192.168.1.2
        port: 443
        method: masq
        weight: 1
        check: {type: tcp, port: 8443}
      - address: 192.168.1.3
        port: 443
        method: masq
        weight: 1
        checks:
          - {type: ping}
          - {type: exec, command: [/bin/true], dynamic: true}
  - protocol: tcp
    address: 10.0.0.2
    port: 80
    scheduler: rr
    check: {type: http}
    destinations:
      - {address: 192.168.1.4, port: 80, method: masq, weight: 1}
`

// TestChecksList: "checks" gives a real server several checks, in order,
// from its service or its own; a real server's check or checks replace
// the service's, and a plain check is a list of one. The entries that
// follow a service's checks keep their lines.
func TestChecksList(t *testing.T) {
	for _, doc := range []struct{ name, text string }{{"multi.yaml", multiYAML}, {"multi.json", yamlAsJSON(t, multiYAML)}} {
		_, h, err := Read(doc.name, strings.NewReader(doc.text), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for ref, cs := range h.Checks {
			var types []string
			for _, c := range cs {
				types = append(types, c.Type)
			}
			got[ref.Dest.String()] = strings.Join(types, "+")
		}
		want := map[string]string{"192.168.1.1:443": "tcp+https", "192.168.1.2:443": "tcp", "192.168.1.3:443": "ping+exec",
			"192.168.1.4:80": "http"}
		if len(got) != len(want) {
			t.Errorf("%s: checks %v, want %v", doc.name, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s checks %q, want %q", doc.name, k, got[k], v)
			}
		}
		if len(h.Services) != 2 {
			t.Errorf("%s: services %v, want 2", doc.name, h.Services)
		}
	}
}

// yamlAsJSON is a YAML document written as JSON, indented.
func yamlAsJSON(t *testing.T, doc string) string {
	t.Helper()
	b, _, err := yamlToJSON([]byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestChecksListErrors: check and checks on one level, an empty list and
// a bad field of the second check are errors naming their lines, in YAML
// and in a checks file.
func TestChecksListErrors(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"    checks:\n", "    check: {type: tcp}\n    checks:\n", "multi.yaml:8: services[0]: check and checks: give one of them"},
		{"        path: /healthz\n", "        interval: 2x\n", "multi.yaml:10: services[0].checks[1]: interval: \"2x\""},
		{"        checks:\n          - {type: ping}\n          - {type: exec, command: [/bin/true], dynamic: true}\n",
			"        checks: []\n", "multi.yaml:23: services[0].destinations[2].checks: empty"},
		{"          - {type: ping}\n", "          - {type: ping, port: 7}\n", "multi.yaml:24: services[0].destinations[2].checks[0]: port"},
		{"version: 2\n", "version: 1\n", "multi.yaml:7: services[0].checks needs \"version\": 2"},
	} {
		doc := strings.Replace(multiYAML, tc.old, tc.new, 1)
		if doc == multiYAML {
			t.Fatalf("%q not in the document", tc.old)
		}
		_, _, err := Read("multi.yaml", strings.NewReader(doc), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// TestChecksFileList: a checks file gives checks to a service and to a
// real server, with line errors as for check.
func TestChecksFileList(t *testing.T) {
	set, _, err := Read("rules", strings.NewReader("-A -t 10.0.0.1:80 -s wrr\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 3\n"+
		"-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 1\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := `version: 2
checks:
  - service: -t 10.0.0.1:80
    checks: [{type: tcp}, {type: http, path: /ok}]
    destinations:
      - address: 192.168.1.2
        port: 80
        checks:
          - {type: smtp}
`
	h, err := ReadChecks("checks.yaml", []byte(checks), set)
	if err != nil {
		t.Fatal(err)
	}
	for dest, want := range map[string]string{"192.168.1.1:80": "tcp http", "192.168.1.2:80": "smtp"} {
		var got []string
		for ref, cs := range h.Checks {
			if ref.Dest.String() == dest {
				for _, c := range cs {
					got = append(got, c.Type)
				}
			}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s: checks %v, want %s", dest, got, want)
		}
	}
	bad := strings.Replace(checks, "{type: smtp}", "{type: smtp, rise: -1}", 1)
	if _, err := ReadChecks("checks.yaml", []byte(bad), set); err == nil || !strings.Contains(err.Error(), "checks.yaml:9: services[0].destinations[1].checks[0]: rise") {
		t.Errorf("error %v, want line 9", err)
	}
}

// TestChecksListJSONLines: in JSON too, an error names the line of the
// field at fault, and a service's checks are no entries: the real server
// after them keeps its own line.
func TestChecksListJSONLines(t *testing.T) {
	for _, tc := range []struct{ old, new, at string }{
		{"        path: /healthz\n", "        interval: 2x\n", `"2x"`},
		{"{address: 192.168.1.1, port: 443, method: masq, weight: 3}", "{address: 192.168.1.1, port: 443, method: masq, weight: -3}", `-3`},
	} {
		doc := yamlAsJSON(t, strings.Replace(multiYAML, tc.old, tc.new, 1))
		line := 1 + strings.Count(doc[:strings.Index(doc, tc.at)], "\n")
		_, _, err := Read("multi.json", strings.NewReader(doc), nil)
		if want := "multi.json:" + strconv.Itoa(line) + ":"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}
