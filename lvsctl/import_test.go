package lvsctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs/ipvstest"
)

// TestImportCommand: lvsctl import keepalived prints the YAML on stdout and
// the notices on stderr; a malformed file or one that needs --lossy is
// exit 2 with FILE:LINE and nothing on stdout; the kernel is never opened.
func TestImportCommand(t *testing.T) {
	env := testEnv(t, ipvstest.New())
	env.Open = nil // a call would panic: import must not touch the kernel
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.conf", "vrrp_instance V { }\nvirtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    TCP_CHECK { }\n  }\n}\n")
	r := run(t, env, "", "import", "keepalived", good)
	if r.code != exitOK || !strings.Contains(r.stdout, "version: 2\n") || !strings.Contains(r.stdout, "\n    address: 192.0.2.1\n") ||
		!strings.Contains(r.stderr, "lvsctl: notice: "+good+":1: vrrp_instance: skipped") {
		t.Errorf("good file: %+v", r)
	}
	regex := write("regex.conf", "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    HTTP_GET {\n      url {\n        path /\n        regex ok\n      }\n    }\n  }\n}\n")
	for _, c := range []struct {
		name, text, want string
	}{
		{"empty.conf", "vrrp_instance V { }\n", "empty.conf: no virtual server with real servers"},
		{"random.conf", "$X=1\nvirtual_server 192.0.2.${_RANDOM} 80 {\n", "random.conf:2: ${_RANDOM}"},
		{"include.conf", "\n\ninclude missing.conf\n", "include.conf:3: include "},
		{"two.conf", "virtual_server 192.0.2.1 80 {\n  real_server 10.0.0.1 80 {\n    FILE_CHECK { }\n  }\n  real_server 10.0.0.2 80 {\n    BFD_CHECK { }\n  }\n}\n", "two.conf:3: FILE_CHECK"},
	} {
		r := run(t, env, "", "import", "keepalived", write(c.name, c.text))
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: %+v; want exit 2, nothing on stdout, %q", c.name, r, c.want)
		}
	}
	// Every refusal of a file, in line order, and keepalived's readings.
	r = run(t, env, "", "import", "keepalived", filepath.Join(dir, "two.conf"))
	if i, j := strings.Index(r.stderr, "two.conf:3: FILE_CHECK"), strings.Index(r.stderr, "two.conf:6: BFD_CHECK"); i < 0 || j < i {
		t.Errorf("two refusals: %+v", r)
	}
	lower := write("lower.conf", "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  lb_kind dr\n  real_server 10.0.0.1 80 {\n  }\n}\n")
	r = run(t, env, "", "import", "keepalived", lower)
	if r.code != exitOK || !strings.Contains(r.stderr, "lvsctl: notice: "+lower+":3: lb_kind \"dr\"") || !strings.Contains(r.stdout, "method: masq") {
		t.Errorf("lower-case lb_kind: %+v", r)
	}
	r = run(t, env, "", "import", "keepalived", regex)
	if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "regex.conf:7: regex:") || !strings.Contains(r.stderr, "--lossy") {
		t.Errorf("regex without --lossy: %+v", r)
	}
	r = run(t, env, "", "import", "keepalived", "--lossy", regex)
	if r.code != exitOK || !strings.Contains(r.stdout, "# CHANGED: regex.conf:7: regex:") || !strings.Contains(r.stderr, "warning: changed: "+regex+":7: regex:") {
		t.Errorf("regex with --lossy: %+v", r)
	}
	r = run(t, env, "", "import", "keepalived", filepath.Join(dir, "absent.conf"))
	if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "absent.conf") {
		t.Errorf("absent file: %+v", r)
	}
	// --config-id is keepalived's -i: which @ID lines are read.
	ids := write("ids.conf", "$A=10.0.0.1\n@lb1 $A=10.0.0.2\n@^lb1 $A=10.0.0.3\nvirtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server $A 80 {\n  }\n}\n")
	for id, want := range map[string]string{"lb1": "10.0.0.2", "lb2": "10.0.0.3"} {
		r = run(t, env, "", "import", "keepalived", "--config-id", id, ids)
		if r.code != exitOK || !strings.Contains(r.stdout, "{address: "+want+",") {
			t.Errorf("--config-id %s: %+v; want real server %s", id, r, want)
		}
	}
	r = run(t, env, "", "import", "keepalived", "--help")
	if r.code != exitOK || !strings.Contains(r.stdout, "\nExamples:\n  lvsctl import keepalived") {
		t.Errorf("help: %+v", r)
	}
}
