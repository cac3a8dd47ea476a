package desired

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/rules"
)

// lineCase is a document whose read fails at a line: the error starts
// with "FILE:line: " and holds msg, and the line, as a person counts
// them (the first is 1), holds has.
type lineCase struct {
	name string
	doc  string
	line int
	has  string
	msg  string
}

// edit is doc with old replaced by new once (old must be there).
func edit(t *testing.T, doc, old, new string) string {
	t.Helper()
	if !strings.Contains(doc, old) {
		t.Fatalf("%q not in the document", old)
	}
	return strings.Replace(doc, old, new, 1)
}

// testLines writes each case's document to a file named file and reads
// it with read, which must fail at the case's line.
func testLines(t *testing.T, file string, read func(path string) error, cases []lineCase) {
	t.Helper()
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines := strings.Split(tc.doc, "\n")
			if tc.line < 1 || tc.line > len(lines) || !strings.Contains(lines[tc.line-1], tc.has) {
				t.Fatalf("the case is wrong: line %d does not hold %q:\n%s", tc.line, tc.has, tc.doc)
			}
			path := filepath.Join(dir, file)
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			err := read(path)
			want := fmt.Sprintf("%s:%d: ", path, tc.line)
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want %q...%q; line %d is %q", err, want, tc.msg, tc.line, lines[tc.line-1])
			}
		})
	}
}

// readFile reads a desired-state file as lvsctl does.
func readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, err = Read(path, f, nil)
	return err
}

// readChecksFile reads a checks file for checkedRules.
func readChecksFile(t *testing.T) func(path string) error {
	set, err := ReadText("rules", []byte(checkedRules), nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = ReadChecks(path, data, set)
		return err
	}
}

const checkedRules = "-A -t 10.0.0.1:80 -s wrr\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 1\n-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 1\n"

const blockYAML = `version: 2
services:
  - protocol: tcp
    address: 10.0.0.1
    port: 80
    scheduler: wrr
    persistence:
      timeout: 300
    check:
      type: http
      path: /healthz
      interval: 2s
      timeout: 1s
      rise: 2
      fall: 3
      expect: "200"
    when_all_down: sorry
    sorry_server: 192.168.9.9:80
    destinations:
      - address: 192.168.1.1
        port: 80
        method: masq
        weight: 1
        check:
          type: tcp
          port: 8080
          via: direct
      - address: 192.168.1.2
        port: 80
        method: tunnel
        weight: 1
        tunnel:
          type: gue
          port: 6080
`

const flowYAML = `version: 2
services:
  - {protocol: tcp, address: 10.0.0.1, port: 80,
     check: {type: http, path: /healthz,
             interval: 2s, timeout: 1s},
     when_all_down: sorry, sorry_server: 192.168.9.9:80,
     destinations: [
       {address: 192.168.1.1, port: 80, method: masq, weight: 1,
        check: {type: tcp, via: direct}},
       {address: 192.168.1.2, port: 80, method: tunnel, weight: 1,
        tunnel: {type: gue, port: 6080}}]}
`

const jsonDoc = `{"version": 2, "services": [
  {"protocol": "tcp", "address": "10.0.0.1", "port": 80,
   "check": {"type": "http",
             "path": "/healthz",
             "interval": "2s"},
   "when_all_down": "sorry",
   "sorry_server": "192.168.9.9:80",
   "persistence": {"timeout": 300,
                   "netmask": "255.255.255.255"},
   "destinations": [
     {"address": "192.168.1.1", "port": 80,
      "method": "masq", "weight": 1,
      "check": {"type": "tcp",
                "via": "direct"}},
     {"address": "192.168.1.2", "port": 80, "method": "tunnel", "weight": 1,
      "tunnel": {"type": "gue",
                 "port": 6080}}]}]}
`

const checksYAML = `version: 2
checks:
  - service: -t 10.0.0.1:80
    check:
      type: tcp
      interval: 2s
    destinations:
      - address: 192.168.1.2
        port: 80
        check:
          type: http
          path: /ok
`

const checksJSON = `{"version": 2,
 "checks": [
  {"service": "-t 10.0.0.1:80",
   "check": {"type": "tcp",
             "interval": "2s"},
   "destinations": [
     {"address": "192.168.1.2", "port": 80,
      "check": {"type": "http",
                "path": "/ok"}}]}]}
`

// The documents above read without error.
func TestErrorLinesDocumentsRead(t *testing.T) {
	for name, doc := range map[string]string{"block.yaml": blockYAML, "flow.yaml": flowYAML, "doc.json": jsonDoc} {
		if _, h, err := Read(name, strings.NewReader(doc), nil); err != nil || h == nil {
			t.Errorf("%s: health %v, error %v", name, h, err)
		}
	}
	check := readChecksFile(t)
	dir := t.TempDir()
	for name, doc := range map[string]string{"checks.yaml": checksYAML, "checks.json": checksJSON} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := check(path); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestFieldErrorLinesYAMLBlock: a field's error names the field's line,
// within a check too, not its service's or real server's.
func TestFieldErrorLinesYAMLBlock(t *testing.T) {
	d := blockYAML
	testLines(t, "block.yaml", readFile, []lineCase{
		{"check type", edit(t, d, "type: http", "type: ftp"), 10, "type: ftp", `services[0].check: type "ftp"`},
		{"check path", edit(t, d, "path: /healthz", "path: healthz"), 11, "path:", "services[0].check: path"},
		{"check interval", edit(t, d, "interval: 2s", "interval: 2x"), 12, "interval: 2x", "services[0].check: interval"},
		{"check timeout", edit(t, d, "timeout: 1s", "timeout: 5s"), 13, "timeout: 5s", "must be shorter than interval"},
		{"check rise", edit(t, d, "rise: 2", "rise: -1"), 14, "rise", "rise must be at least 1"},
		{"check fall", edit(t, d, "fall: 3", "fall: -1"), 15, "fall", "fall must be at least 1"},
		{"check expect", edit(t, d, `expect: "200"`, `expect: "abc"`), 16, "expect", `expect "abc"`},
		{"check interval type", edit(t, d, "interval: 2s", "interval: [2s]"), 12, "interval", "check.interval must be a string"},
		{"check unknown field", edit(t, d, "interval: 2s", "intervall: 2s"), 12, "intervall", `unknown field "intervall"`},
		{"check needs version 2", edit(t, d, "version: 2", "version: 1"), 9, "check:", `needs "version": 2`},
		{"when_all_down", edit(t, d, "when_all_down: sorry", "when_all_down: panic"), 17, "when_all_down", "when_all_down \"panic\""},
		{"sorry_server", edit(t, d, "sorry_server: 192.168.9.9:80", "sorry_server: nowhere"), 18, "sorry_server", "sorry_server \"nowhere\""},
		{"sorry_server missing", edit(t, d, "    sorry_server: 192.168.9.9:80\n", ""), 17, "when_all_down", "an address:port is needed"},
		{"sorry_server without sorry", edit(t, d, "when_all_down: sorry", "when_all_down: zero"), 18, "sorry_server", "only with when_all_down sorry"},
		{"destination check type", edit(t, d, "type: tcp", "type: ftp"), 25, "type: ftp", `destinations[0].check: type "ftp"`},
		{"destination check port", edit(t, d, "port: 8080", "port: 70000"), 26, "port: 70000", "destinations[0].check: port 70000"},
		{"destination check via", edit(t, d, "via: direct", "via: tunnel"), 27, "via", `destinations[0].check: via "tunnel"`},
		{"service protocol", edit(t, d, "protocol: tcp", "protocol: icmp"), 3, "protocol", `protocol "icmp"`},
		{"service address", edit(t, d, "address: 10.0.0.1", "address: 10.0.0.x"), 4, "10.0.0.x", `address "10.0.0.x"`},
		{"service port type", edit(t, d, "port: 80\n    scheduler", "port: eighty\n    scheduler"), 5, "eighty", "services[].port must be an integer"},
		{"persistence timeout", edit(t, d, "timeout: 300", "timeout: x"), 8, "timeout: x", "persistence.timeout must be an integer"},
		{"destination address", edit(t, d, "address: 192.168.1.1", "address: 192.168.1.x"), 20, "192.168.1.x", `address "192.168.1.x"`},
		{"destination method", edit(t, d, "method: masq", "method: bridge"), 22, "bridge", `method "bridge"`},
		{"destination weight", edit(t, d, "weight: 1\n        check", "weight: -5\n        check"), 23, "weight: -5", "illegal weight"},
		{"destination unknown field", edit(t, d, "weight: 1\n        check", "wieght: 1\n        check"), 23, "wieght", `unknown field "wieght"`},
		{"tunnel type", edit(t, d, "type: gue", "type: vxlan"), 33, "vxlan", "illegal tunnel type"},
	})
}

// TestFieldErrorLinesYAMLFlow: the same in flow style, over several lines.
func TestFieldErrorLinesYAMLFlow(t *testing.T) {
	d := flowYAML
	testLines(t, "flow.yaml", readFile, []lineCase{
		{"check type", edit(t, d, "type: http", "type: ftp"), 4, "type: ftp", `services[0].check: type "ftp"`},
		{"check path", edit(t, d, "path: /healthz", "path: healthz"), 4, "path:", "services[0].check: path"},
		{"check interval", edit(t, d, "interval: 2s", "interval: 2x"), 5, "interval: 2x", "services[0].check: interval"},
		{"check timeout", edit(t, d, "timeout: 1s", "timeout: 5s"), 5, "timeout: 5s", "must be shorter than interval"},
		{"when_all_down", edit(t, d, "when_all_down: sorry", "when_all_down: panic"), 6, "panic", "when_all_down \"panic\""},
		{"sorry_server", edit(t, d, "sorry_server: 192.168.9.9:80", "sorry_server: nowhere"), 6, "nowhere", "sorry_server \"nowhere\""},
		{"service address", edit(t, d, "address: 10.0.0.1", "address: 10.0.0.x"), 3, "10.0.0.x", `address "10.0.0.x"`},
		{"destination address", edit(t, d, "address: 192.168.1.1", "address: 192.168.1.x"), 8, "192.168.1.x", `address "192.168.1.x"`},
		{"destination check type", edit(t, d, "type: tcp", "type: ftp"), 9, "ftp", `destinations[0].check: type "ftp"`},
		{"destination check via", edit(t, d, "via: direct", "via: tunnel"), 9, "tunnel", `destinations[0].check: via "tunnel"`},
		{"destination weight", edit(t, d, "weight: 1,\n", "weight: -5,\n"), 8, "weight: -5", "illegal weight"},
		{"tunnel port", edit(t, d, "port: 6080", "port: 70000"), 11, "70000", "tunnel.port must be an integer"},
		{"check unknown field", edit(t, d, "interval: 2s", "intervall: 2s"), 5, "intervall", `unknown field "intervall"`},
	})
}

// TestFieldErrorLinesJSON: the same in JSON.
func TestFieldErrorLinesJSON(t *testing.T) {
	d := jsonDoc
	testLines(t, "doc.json", readFile, []lineCase{
		{"check type", edit(t, d, `"type": "http"`, `"type": "ftp"`), 3, "ftp", `services[0].check: type "ftp"`},
		{"check path", edit(t, d, `"path": "/healthz"`, `"path": "healthz"`), 4, "path", "services[0].check: path"},
		{"check interval", edit(t, d, `"interval": "2s"`, `"interval": "2x"`), 5, "2x", "services[0].check: interval"},
		{"check unknown field", edit(t, d, `"interval": "2s"`, `"intervall": "2s"`), 5, "intervall", `unknown field "intervall"`},
		{"check needs version 2", edit(t, d, `"version": 2`, `"version": 1`), 3, "check", `needs "version": 2`},
		{"when_all_down", edit(t, d, `"when_all_down": "sorry"`, `"when_all_down": "panic"`), 6, "panic", "when_all_down \"panic\""},
		{"sorry_server", edit(t, d, `"sorry_server": "192.168.9.9:80"`, `"sorry_server": "nowhere"`), 7, "nowhere", "sorry_server \"nowhere\""},
		{"persistence netmask", edit(t, d, `"netmask": "255.255.255.255"`, `"netmask": "bogus"`), 9, "bogus", "persistent mask"},
		{"service address", edit(t, d, `"address": "10.0.0.1"`, `"address": "10.0.0.x"`), 2, "10.0.0.x", `address "10.0.0.x"`},
		{"service port type", edit(t, d, `"port": 80,`+"\n   \"check\"", `"port": "x",`+"\n   \"check\""), 2, `"x"`, "services[].port must be an integer"},
		{"destination address", edit(t, d, `"address": "192.168.1.1"`, `"address": "192.168.1.x"`), 11, "192.168.1.x", `address "192.168.1.x"`},
		{"destination method", edit(t, d, `"method": "masq"`, `"method": "bridge"`), 12, "bridge", `method "bridge"`},
		{"destination weight", edit(t, d, `"weight": 1,`, `"weight": -5,`), 12, "-5", "illegal weight"},
		{"destination unknown field", edit(t, d, `"weight": 1,`, `"wieght": 1,`), 12, "wieght", `unknown field "wieght"`},
		{"destination check type", edit(t, d, `"type": "tcp"`, `"type": "ftp"`), 13, "ftp", `destinations[0].check: type "ftp"`},
		{"destination check via", edit(t, d, `"via": "direct"`, `"via": "tunnel"`), 14, "tunnel", `destinations[0].check: via "tunnel"`},
		{"tunnel port", edit(t, d, `"port": 6080`, `"port": 70000`), 17, "70000", "tunnel.port must be an integer"},
		// "path" is a field of a check: the service's is the unknown one.
		{"unknown field known elsewhere", edit(t, d, `"when_all_down": "sorry",`, `"when_all_down": "sorry", "path": "/",`), 6, "path", `unknown field "path"`},
		{"bad version", edit(t, d, `"version": 2`, `"version": 7`), 1, "version", `"version": 7`},
	})
}

// TestFieldErrorLinesChecksFile: a checks file's errors name the field's
// line, in YAML and JSON.
func TestFieldErrorLinesChecksFile(t *testing.T) {
	read := readChecksFile(t)
	y, j := checksYAML, checksJSON
	testLines(t, "checks.yaml", read, []lineCase{
		{"no such service", edit(t, y, "-t 10.0.0.1:80", "-t 10.0.0.9:80"), 3, "10.0.0.9", "no such service"},
		{"check interval", edit(t, y, "interval: 2s", "interval: 2x"), 6, "2x", "services[0].check: interval"},
		{"destination check path", edit(t, y, "path: /ok", "path: ok"), 12, "path: ok", `destinations[1].check: path "ok"`},
		{"no such real server", edit(t, y, "192.168.1.2", "192.168.1.7"), 8, "192.168.1.7", "is no real server"},
	})
	testLines(t, "checks.json", read, []lineCase{
		{"check interval", edit(t, j, `"interval": "2s"`, `"interval": "2x"`), 5, "2x", "services[0].check: interval"},
		{"destination check path", edit(t, j, `"path": "/ok"`, `"path": "ok"`), 9, "ok", `destinations[1].check: path "ok"`},
		{"unknown field", edit(t, j, `"path": "/ok"`, `"paht": "/ok"`), 9, "paht", `unknown field "paht"`},
	})
}

// TestYAMLSyntaxErrorLines: a YAML syntax error names the line of the
// problem, not a line before it.
func TestYAMLSyntaxErrorLines(t *testing.T) {
	big := string(benchYAML(300, 3))
	bigLines := strings.Split(big, "\n")
	// The flow mapping of a real server deep in the document, left open.
	bad := strings.Index(big, "{address: 10.200.1.150")
	badLine := strings.Count(big[:bad], "\n") + 1
	unclosed := big[:bad] + strings.Replace(big[bad:], "weight: 1},", "weight: 1,", 1)
	if !strings.Contains(bigLines[badLine-1], "10.200.1.150") {
		t.Fatal("the big case is wrong")
	}
	testLines(t, "syntax.yaml", readFile, []lineCase{
		{"missing brace", "version: 2\nservices:\n  - protocol: tcp\n    address: 10.0.0.1\n    port: 80\n    destinations:\n      - {address: 10.0.0.2, port: 80}\n      - {address: 10.0.0.3, port: 80\n      - {address: 10.0.0.4, port: 80}\n",
			8, "10.0.0.3", "did not find expected ',' or '}'"},
		{"missing brace of a check", "version: 2\nservices:\n  - protocol: tcp\n    address: 10.0.0.1\n    port: 80\n    check: {type: tcp, interval: 2s\n    destinations: []\n",
			6, "check:", "YAML:"},
		{"tab in the indentation", "version: 2\nservices:\n  - protocol: tcp\n    address: 10.0.0.1\n\tport: 80\n", 5, "\tport", "tab character"},
		{"tab before a check field", "version: 2\nservices:\n  - protocol: tcp\n    check:\n      type: tcp\n\t  interval: 2s\n", 6, "interval", "YAML:"},
		{"indentation", "version: 2\nservices:\n  - protocol: tcp\n   address: x\n", 4, "address", "did not find expected '-' indicator"},
		{"key indentation", "version: 2\nservices:\n  - protocol: tcp\n    address: 10.0.0.1\n      port: 80\n", 5, "port", "mapping values are not allowed"},
		{"unclosed quote", "version: 2\nservices:\n  - protocol: tcp\n    address: \"10.0.0.1\n", 4, "address", "YAML:"},
		{"two colons", "version: 2\nservices:\n  - a: b: c\n", 3, "a: b: c", "mapping values are not allowed"},
		{"unknown alias", "version: 2\nservices:\n  - protocol: tcp\n    check: *nowhere\n", 4, "*nowhere", "unknown anchor"},
		{"invalid UTF-8", "version: 2\nservices:\n  - protocol: tcp\n    address: \xff\n", 4, "address", "YAML:"},
		{"unclosed sequence", "version: 2\nservices: [\n", 2, "services: [", "YAML:"},
		{"not an integer", "version: 2\nservices:\n  - protocol: tcp\n    port: 0x1FFFFFFFFFFFFFFFFF\n", 4, "port", "port must be an integer"},
		// The parser meets the problem at the "]" two lines on: the next
		// mapping is a key of the one left open.
		{"deep in a large document", unclosed, badLine + 2, "]}", "did not find expected node content"},
	})
}

// TestJSONSyntaxErrorLines: a JSON syntax error names its line.
func TestJSONSyntaxErrorLines(t *testing.T) {
	d := jsonDoc
	testLines(t, "syntax.json", readFile, []lineCase{
		{"missing comma", edit(t, d, `"port": 80,`+"\n   \"check\"", `"port": 80`+"\n   \"check\""), 3, "check", "JSON:"},
		{"missing brace", edit(t, d, `"via": "direct"}},`, `"via": "direct"},`), 15, "192.168.1.2", "JSON:"},
		{"data after the document", d + "{}\n", 18, "{}", "data after the document"},
	})
}

// TestRepeatedKeysYAML: a key given twice, at any level, in block or
// flow style, is an error at its second line that names the first.
func TestRepeatedKeysYAML(t *testing.T) {
	b, f := blockYAML, flowYAML
	manyKeys := "version: 2\nservices: []\n" // more keys than smallObject
	for i := range 20 {
		manyKeys += fmt.Sprintf("k%d: %d\n", i, i)
	}
	manyKeys += "K7: 1\n"
	testLines(t, "repeated.yaml", readFile, []lineCase{
		{"top level", b + "version: 2\n", 35, "version", `"version" repeated: first on line 1`},
		{"top level services", b + "services: []\n", 35, "services", `"services" repeated: first on line 2`},
		{"service", edit(t, b, "scheduler: wrr", "port: 81"), 6, "port: 81", `"port" repeated: first on line 5`},
		{"service, letter case", edit(t, b, "scheduler: wrr", "Port: 81"), 6, "Port: 81", `"Port" repeated: first on line 5 as "port"`},
		{"persistence", edit(t, b, "timeout: 300", "timeout: 300\n      timeout: 60"), 9, "timeout: 60", `"timeout" repeated: first on line 8`},
		{"check", edit(t, b, "rise: 2", "interval: 3s"), 14, "interval: 3s", `"interval" repeated: first on line 12`},
		{"destination", edit(t, b, "weight: 1\n        check", "weight: 1\n        weight: 5\n        check"), 24, "weight: 5", `"weight" repeated: first on line 23`},
		{"destination check", edit(t, b, "via: direct", "via: direct\n          port: 9090"), 28, "port: 9090", `"port" repeated: first on line 26`},
		{"tunnel", edit(t, b, "port: 6080", "port: 6080\n          type: ipip"), 35, "type: ipip", `"type" repeated: first on line 33`},
		{"flow service, one line", "version: 2\nservices:\n  - {protocol: tcp, address: 10.0.0.1, port: 80, port: 81}\n", 3, "port: 81", `"port" repeated: first on line 3`},
		{"flow service", edit(t, f, "when_all_down: sorry,", "port: 81,"), 6, "port: 81", `"port" repeated: first on line 3`},
		{"flow check", edit(t, f, "timeout: 1s}", "timeout: 1s, type: tcp}"), 5, "type: tcp", `"type" repeated: first on line 4`},
		{"flow destination", edit(t, f, "check: {type: tcp, via: direct}}", "check: {type: tcp, via: direct}, weight: 2}"), 9, "weight: 2", `"weight" repeated: first on line 8`},
		{"flow destination check", edit(t, f, "via: direct}", "via: direct, via: vip}"), 9, "via: vip", `"via" repeated: first on line 9`},
		{"flow tunnel", edit(t, f, "port: 6080}", "port: 6080, port: 6081}"), 11, "6081", `"port" repeated: first on line 11`},
		{"quoted key", edit(t, b, "scheduler: wrr", `"port": 81`), 6, `"port": 81`, `"port" repeated: first on line 5`},
		// encoding/json takes "ſ" (long s) for "s" in a field's name.
		{"non-ASCII letter case", edit(t, b, "persistence:", "ſcheduler: rr\n    persistence:"), 7, "ſcheduler", `"ſcheduler" repeated: first on line 6 as "scheduler"`},
		{"many keys", manyKeys, 23, "K7", `"K7" repeated: first on line 10 as "k7"`},
	})
	testLines(t, "checks.yaml", readChecksFile(t), []lineCase{
		{"checks entry", edit(t, checksYAML, "    check:\n      type: tcp", "    service: -t 10.0.0.1:80\n    check:\n      type: tcp"), 4, "service", `"service" repeated: first on line 3`},
		{"checks destination check", edit(t, checksYAML, "path: /ok", "path: /ok\n          path: /"), 13, "path: /", `"path" repeated: first on line 12`},
	})
}

// TestRepeatedKeysJSON: the same in JSON.
func TestRepeatedKeysJSON(t *testing.T) {
	d := jsonDoc
	testLines(t, "repeated.json", readFile, []lineCase{
		{"top level", edit(t, d, `{"version": 2, "services": [`, `{"version": 2, "version": 1, "services": [`), 1, "version", `"version" repeated: first on line 1`},
		{"top level after the services", edit(t, d, "}]}]}\n", "}]}],\n \"version\": 2}\n"), 18, "version", `"version" repeated: first on line 1`},
		{"service", edit(t, d, `"when_all_down": "sorry",`, `"port": 81,`), 6, "81", `"port" repeated: first on line 2`},
		{"service, letter case", edit(t, d, `"when_all_down": "sorry",`, `"PORT": 81,`), 6, "PORT", `"PORT" repeated: first on line 2 as "port"`},
		{"service, escaped", edit(t, d, `"when_all_down": "sorry",`, `"p\u006frt": 81,`), 6, "81", `"port" repeated: first on line 2`},
		{"persistence", edit(t, d, `"netmask": "255.255.255.255"`, `"timeout": 60`), 9, "60", `"timeout" repeated: first on line 8`},
		{"check", edit(t, d, `"path": "/healthz",`, `"type": "tcp",`), 4, "tcp", `"type" repeated: first on line 3`},
		{"destination", edit(t, d, `"method": "masq", "weight": 1,`, `"method": "masq", "weight": 1, "weight": 2,`), 12, "weight", `"weight" repeated: first on line 12`},
		{"destination check", edit(t, d, `"via": "direct"}}`, `"via": "direct", "type": "http"}}`), 14, "http", `"type" repeated: first on line 13`},
		{"tunnel", edit(t, d, `"port": 6080}`, `"port": 6080, "type": "ipip"}`), 17, "ipip", `"type" repeated: first on line 16`},
	})
	testLines(t, "checks.json", readChecksFile(t), []lineCase{
		{"checks entry", edit(t, checksJSON, `"check": {"type": "tcp",`, `"service": "-t 10.0.0.1:80", "check": {"type": "tcp",`), 4, "service", `"service" repeated: first on line 3`},
		{"checks destination check", edit(t, checksJSON, `"path": "/ok"`, `"path": "/ok", "path": "/"`), 9, "path", `"path" repeated: first on line 9`},
	})
}

// TestRepeatedKeyThroughCache: an entry edited to repeat a key fails at
// its line when read through a cache that holds the entries of the
// document before the edit.
func TestRepeatedKeyThroughCache(t *testing.T) {
	doc := string(benchYAML(50, 3))
	cache := &YAMLCache{}
	if _, _, err := ReadCached("c.yaml", strings.NewReader(doc), nil, cache); err != nil {
		t.Fatal(err)
	}
	i := strings.Index(doc, "10.100.0.30, port: 80,")
	line := strings.Count(doc[:i], "\n") + 1
	bad := doc[:i] + strings.Replace(doc[i:], "port: 80,", "port: 80, port: 81,", 1)
	_, _, err := ReadCached("c.yaml", strings.NewReader(bad), nil, cache)
	want := fmt.Sprintf("c.yaml:%d: \"port\" repeated: first on line %d", line, line)
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	// Mended, it reads as before.
	set, _, err := ReadCached("c.yaml", strings.NewReader(doc), nil, cache)
	if err != nil {
		t.Fatal(err)
	}
	want2, _, _ := Read("c.yaml", strings.NewReader(doc), nil)
	if d := rules.Diff(want2, set, rules.DiffOptions{}); !d.InSync() {
		t.Errorf("cached read differs: %+v", d.Changes)
	}
}

// TestSameKeyAsDecoder: sameKey takes two keys for one exactly when
// encoding/json sets a field named by the one from a key written as the
// other.
func TestSameKeyAsDecoder(t *testing.T) {
	keys := []string{"port", "Port", "PORT", "ports", "pOrt", "scheduler", "ſcheduler", "SCHEDULER",
		"k", "K", "\u212a", "a", "b", "@x", "`x", "ß", "ss", "SS", "é", "É", "x\u0130", "xi", "xI"}
	for _, field := range keys {
		// Each key is tried as itself first.
		others := append([]string{field}, keys...)
		typ := reflect.StructOf([]reflect.StructField{{Name: "F", Type: reflect.TypeFor[int](), Tag: reflect.StructTag(`json:"` + field + `"`)}})
		for _, key := range others {
			v := reflect.New(typ)
			doc, _ := json.Marshal(map[string]int{key: 1})
			if err := json.Unmarshal(doc, v.Interface()); err != nil {
				t.Fatal(err)
			}
			decoder := v.Elem().Field(0).Int() == 1
			if key == field && !decoder {
				break // not a name a tag can give
			}
			if got := sameKey(field, key); got != decoder {
				t.Errorf("sameKey(%q, %q) = %v, but the decoder says %v", field, key, got, decoder)
			}
			if got := foldKey(field) == foldKey(key); got != decoder {
				t.Errorf("foldKey(%q) == foldKey(%q) is %v, but the decoder says %v", field, key, got, decoder)
			}
		}
	}
}

// TestNumberForText: a number where text is due (YAML reads expect: 204
// as one) is refused at its line with a hint to quote it.
func TestNumberForText(t *testing.T) {
	doc := "version: 2\nservices:\n  - {protocol: tcp, address: 10.0.0.1, port: 80, scheduler: wrr,\n" +
		"     check: {type: http, expect: 204},\n" +
		"     destinations: [{address: 192.168.1.1, port: 80, method: masq, weight: 1}]}\n"
	_, _, err := Read("d.yaml", strings.NewReader(doc), nil)
	want := `d.yaml:4: services[].check.expect must be a string, not a number (quote a number meant as text: "204")`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

const urlsYAML = `version: 2
services:
  - protocol: tcp
    address: 10.0.0.1
    port: 80
    check:
      type: http
      urls:
        - path: /index.html
          digest:
            - 9b3a0c85a887a256d6939da88aadd8cd
        - path: /healthz
          expect: "200"
    destinations:
      - address: 192.168.1.1
        port: 80
        method: masq
        weight: 1
        check:
          type: exec
          command: [/bin/true]
          dynamic: true
      - {address: 192.168.1.2, port: 80, method: masq, weight: 1}
`

// TestFieldErrorLinesURLs: an error within a check's urls names the line
// of the url's field, or of the digest itself; dynamic and urls are
// refused on checks of other types at their line.
func TestFieldErrorLinesURLs(t *testing.T) {
	d := urlsYAML
	testLines(t, "urls.yaml", readFile, []lineCase{
		{"digest", edit(t, d, "- 9b3a0c85a887a256d6939da88aadd8cd", "- 9b3a0c85"), 11, "9b3a0c85", `services[0].check: urls[0].digest[0] "9b3a0c85": not an MD5 digest`},
		{"second url path", edit(t, d, "path: /healthz", "path: healthz"), 12, "healthz", `services[0].check: urls[1].path "healthz"`},
		{"second url expect", edit(t, d, `expect: "200"`, `expect: "2xx"`), 13, "expect", `services[0].check: urls[1].expect "2xx"`},
		{"url without path", edit(t, d, "- path: /healthz\n          expect", "- expect"), 12, "expect", `services[0].check: urls[1].path: missing`},
		{"urls with path", edit(t, d, "      urls:", "      path: /\n      urls:"), 9, "urls", "urls: not with path or expect"},
		{"urls on tcp", edit(t, d, "type: http", "type: tcp"), 8, "urls", "urls: not for tcp checks"},
		{"dynamic on tcp", edit(t, d, "type: exec\n          command: [/bin/true]", "type: tcp"), 21, "dynamic", "dynamic: not for tcp checks"},
	})
}
