package keepalived

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/rules/desired"
)

// files writes name → contents under a new directory and returns it.
func files(t *testing.T, m map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for n, c := range m {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func imp(t *testing.T, conf string, lossy bool) (*Result, error) {
	t.Helper()
	dir := files(t, map[string]string{"keepalived.conf": conf})
	return Import(filepath.Join(dir, "keepalived.conf"), Options{Lossy: lossy})
}

func mustImport(t *testing.T, conf string, lossy bool) *Result {
	t.Helper()
	r, err := imp(t, conf, lossy)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func hasNotice(r *Result, sub string) *Notice {
	for i := range r.Notices {
		if strings.Contains(r.Notices[i].Msg, sub) {
			return &r.Notices[i]
		}
	}
	return nil
}

func TestSplitLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{`a b  c`, []string{"a", "b", "c"}},
		{`real_server 1.2.3.4 80{`, []string{"real_server", "1.2.3.4", "80", "{"}},
		{`misc_path "/bin/x a b" # comment`, []string{"misc_path", "/bin/x a b"}},
		{`weight 1 ! comment`, []string{"weight", "1"}},
		{`path /a\#b`, []string{"path", "/a#b"}},
		{`path "/a#b!"`, []string{"path", "/a#b!"}},
		{`}}`, []string{"}", "}"}},
		{`# only`, nil},
	} {
		got, err := splitLine(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("splitLine(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := splitLine(`path "/a`); err == nil {
		t.Error(`splitLine of an unterminated quote: no error`)
	}
}

const basic = `! sample
virtual_server 192.0.2.10 80 {
    delay_loop 6
    lb_algo wrr
    lb_kind DR
    protocol TCP
    persistence_timeout 50
    persistence_granularity 255.255.255.0
    real_server 10.0.0.1 80 {
        weight 3
        inhibit_on_failure
        uthreshold 100
        lthreshold 10
        TCP_CHECK {
            connect_port 8080
            connect_timeout 3
            retry 2
        }
    }
    real_server 10.0.0.2 80
    {
        weight 0
        inhibit_on_failure
        TCP_CHECK { connect_port 8080
            connect_timeout 3
            retry 2 }
    }
}
`

func TestBasicService(t *testing.T) {
	r := mustImport(t, basic, false)
	if len(r.Document.Services) != 1 {
		t.Fatalf("services: %d, want 1", len(r.Document.Services))
	}
	s := r.Document.Services[0]
	port := uint16(80)
	want := desired.JSONService{Protocol: "tcp", Address: "192.0.2.10", Port: &port, Family: "inet", Scheduler: "wrr",
		Persistence: &desired.JSONPersistence{Timeout: 50, Netmask: "255.255.255.0"},
		Check:       &health.Spec{Type: "tcp", Port: 8080, Interval: "6s", Timeout: "3s", Rise: 1, Fall: 3, Via: "direct"},
		WhenAllDown: desired.Zero,
		Destinations: []desired.JSONDestination{
			{Address: "10.0.0.1", Port: 80, Method: "route", Weight: 3, UpperThreshold: 100, LowerThreshold: 10},
			{Address: "10.0.0.2", Port: 80, Method: "route", Weight: 0},
		}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got\n%+v\nwant\n%+v", s, want)
	}
	if n := hasNotice(r, "inhibit_on_failure"); n != nil {
		t.Errorf("inhibit_on_failure given, yet a notice: %v", n)
	}
}

func TestInhibitAbsentIsNoticed(t *testing.T) {
	r := mustImport(t, strings.ReplaceAll(basic, "inhibit_on_failure", ""), false)
	n := hasNotice(r, "no inhibit_on_failure")
	if n == nil || n.Lossy || n.Service != 0 || !strings.HasSuffix(n.File, "keepalived.conf") || n.Line != 9 {
		t.Errorf("notice = %+v; want one at keepalived.conf:9 for service 0, not lossy", n)
	}
}

func TestRetryDefaults(t *testing.T) {
	r := mustImport(t, `virtual_server 192.0.2.1 53 {
  protocol UDP
  lb_algo rr
  real_server 10.0.0.1 53 {
    DNS_CHECK {
      type A
      name example.org
    }
    inhibit_on_failure
  }
  real_server 10.0.0.2 53 {
    MISC_CHECK {
      misc_path "/usr/lib/check 'a b' c"
      misc_timeout 4
      user nobody
    }
    inhibit_on_failure
  }
}`, false)
	d := r.Document.Services[0].Destinations
	if c := d[0].Check; c == nil || c.Type != "dns" || c.Record != "A" || c.Query != "example.org" || c.Fall != 4 || c.Interval != "60s" || c.Timeout != "5s" {
		t.Errorf("dns check: %+v (want fall 4: DNS_CHECK retries 3 times by default)", c)
	}
	if c := d[1].Check; c == nil || c.Type != "exec" || !reflect.DeepEqual(c.Command, []string{"/usr/lib/check", "a b", "c"}) || c.Fall != 1 || c.Timeout != "4s" || c.User != "nobody" {
		t.Errorf("exec check: %+v (want fall 1: MISC_CHECK does not retry)", c)
	}
	if r.Document.Services[0].Protocol != "udp" || r.Document.Services[0].Scheduler != "rr" || d[0].Method != "masq" {
		t.Errorf("service: %+v", r.Document.Services[0])
	}
}

func TestHTTPAndSorry(t *testing.T) {
	conf := `virtual_server 2001:db8::10 443 {
  lb_algo mh
  mh-port
  mh-fallback
  ops
  sorry_server 2001:db8::99 443
  real_server 2001:db8::1 443 {
    inhibit_on_failure
    SSL_GET {
      url { path /healthz
        status_code 200-299 301 }
      virtualhost www.example.org
      retry 0
      delay_loop 2
      connect_timeout 1
    }
  }
}`
	r := mustImport(t, conf, false)
	s := r.Document.Services[0]
	if s.Family != "inet6" || s.Address != "2001:db8::10" || !reflect.DeepEqual(s.SchedulerFlags, []string{"mh-fallback", "mh-port"}) || !s.OnePacket {
		t.Errorf("service: %+v", s)
	}
	if s.WhenAllDown != desired.Sorry || s.SorryServer != "[2001:db8::99]:443" {
		t.Errorf("sorry: %q %q", s.WhenAllDown, s.SorryServer)
	}
	want := &health.Spec{Type: "https", TLSSkipVerify: true, Path: "/healthz", Expect: "200-299,301", Host: "www.example.org", Interval: "2s", Timeout: "1s", Rise: 1, Fall: 1}
	if !reflect.DeepEqual(s.Check, want) {
		t.Errorf("check %+v, want %+v", s.Check, want)
	}
}

// TestDigestsAndURLs: a url's digest and a checker's several urls
// convert to urls, each with its statuses (check_http.c url_check's
// default 200-299) and digest, in keepalived's order; a second digest of
// a url and one that is not 32 hex digits are ignored, as
// check_http.c digest_handler ignores them. One url without a digest
// keeps the plain path and expect.
func TestDigestsAndURLs(t *testing.T) {
	conf := `virtual_server 192.0.2.1 80 {
  real_server 10.0.0.1 80 {
    HTTP_GET {
      url { path /x
            digest 640205B7B0FC66C1EA91C463FAC6334D
            digest 00000000000000000000000000000000 }
      url { path /y
            status_code 200 }
      url { path /z
            digest 640205b7 }
    }
  }
  real_server 10.0.0.2 80 {
    HTTP_GET {
      url { path /only }
    }
  }
}`
	r := mustImport(t, conf, false)
	ds := r.Document.Services[0].Destinations
	want := &health.Spec{Type: "http", URLs: []health.URL{
		{Path: "/x", Expect: "200-299", Digest: []string{"640205b7b0fc66c1ea91c463fac6334d"}},
		{Path: "/y", Expect: "200"},
		{Path: "/z", Expect: "200-299"},
	}, Interval: "60s", Timeout: "5s", Rise: 1, Fall: 2}
	if c := ds[0].Check; !reflect.DeepEqual(c, want) {
		t.Errorf("check %+v, want %+v", c, want)
	}
	if c := ds[1].Check; c == nil || c.Path != "/only" || c.Expect != "200-299" || c.URLs != nil {
		t.Errorf("check %+v, want path /only and no urls", c)
	}
	for _, w := range []struct {
		line int
		msg  string
	}{{6, "digest: a second one for this url: keepalived keeps the first"}, {10, `digest "640205b7": not 32 hex digits: keepalived ignores it`}} {
		n := hasNotice(r, w.msg)
		if n == nil || n.Lossy || n.Line != w.line {
			t.Errorf("notice %q: %+v, want one at line %d, not lossy", w.msg, n, w.line)
		}
	}
	if n := hasNotice(r, "lvsctl requests them all at each probe"); n == nil || n.Lossy || n.Line != 7 {
		t.Errorf("timing notice of several urls: %+v", n)
	}
	// YAML that lvsctl reads back.
	planAccepts(t, "digests", r)
}

// TestURLVirtualhosts: the urls of a checker share one Host header: a url
// whose virtualhost differs from the first's is lossy.
func TestURLVirtualhosts(t *testing.T) {
	conf := `virtual_server 192.0.2.1 80 {
  real_server 10.0.0.1 80 {
    HTTP_GET {
      virtualhost www.example.org
      url { path /x
            virtualhost api.example.org }
      url { path /y }
    }
  }
}`
	if _, err := imp(t, conf, false); err == nil || !strings.Contains(err.Error(), `url /y: virtualhost "www.example.org": lvsctl sends one Host header per check, the first url's ("api.example.org")`) {
		t.Fatalf("err = %v", err)
	}
	r := mustImport(t, conf, true)
	if c := r.Document.Services[0].Check; c == nil || c.Host != "api.example.org" || len(c.URLs) != 2 {
		t.Errorf("check %+v, want the first url's host and both urls", c)
	}
}

// TestMiscDynamic: misc_dynamic is a dynamic exec check
// (check_misc.c misc_dynamic_handler).
func TestMiscDynamic(t *testing.T) {
	conf := `virtual_server 192.0.2.1 80 {
  real_server 10.0.0.1 80 {
    MISC_CHECK {
      misc_path "/usr/local/bin/weigh 10.0.0.1"
      misc_dynamic
    }
  }
}`
	r := mustImport(t, conf, false)
	if c := r.Document.Services[0].Check; c == nil || c.Type != "exec" || !c.Dynamic {
		t.Errorf("check %+v, want a dynamic exec check", c)
	}
}

func TestGroupFwmarkIncludeGlob(t *testing.T) {
	dir := files(t, map[string]string{
		"keepalived.conf": "global_defs { router_id x }\nvrrp_instance A { state MASTER }\nvrrp_instance B { }\ninclude conf.d/*.conf\n",
		"conf.d/10-group.conf": `virtual_server_group G {
  192.0.2.3-5 80
  fwmark 7
}
virtual_server group G {
  lb_kind NAT
  real_server 10.0.0.1 80 { weight 2 }
}`,
		"conf.d/20-fw.conf": "include ../more/x.inc\n",
		"more/x.inc":        "virtual_server fwmark 9 {\n  lb_algo sh\n  sh-port\n  lb_kind TUN\n  real_server 2001:db8::5 0 { }\n}\n",
	})
	r, err := Import(filepath.Join(dir, "keepalived.conf"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range r.Document.Services {
		if s.FWMark != 0 {
			got = append(got, "fwmark "+s.Family+" "+s.Scheduler)
		} else {
			got = append(got, s.Address)
		}
	}
	want := []string{"192.0.2.3", "192.0.2.4", "192.0.2.5", "fwmark inet wlc", "fwmark inet6 sh"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("services %q, want %q", got, want)
	}
	if d := r.Document.Services[4].Destinations[0]; d.Method != "tunnel" || d.Address != "2001:db8::5" {
		t.Errorf("fwmark 9's real server: %+v", d)
	}
	vrrp := 0
	for _, n := range r.Notices {
		if strings.Contains(n.Msg, "vrrp_instance") {
			vrrp++
		}
	}
	if vrrp != 1 || hasNotice(r, "global_defs") == nil {
		t.Errorf("want one notice per skipped kind, got %v", r.Notices)
	}
}

func TestIncludeRecursion(t *testing.T) {
	dir := files(t, map[string]string{"a.conf": "include b.conf\n", "b.conf": "include a.conf\n"})
	_, err := Import(filepath.Join(dir, "a.conf"), Options{})
	if err == nil || !strings.Contains(err.Error(), "b.conf:1") || !strings.Contains(err.Error(), "itself") {
		t.Errorf("err = %v; want the loop named at b.conf:1", err)
	}
}

func TestUnknownKeywordIsNoticed(t *testing.T) {
	r := mustImport(t, "virtual_server 192.0.2.1 80 {\n  frobnicate 3\n  real_server 10.0.0.1 80 { }\n}\n", false)
	n := hasNotice(r, "frobnicate")
	if n == nil || n.Lossy || n.Line != 2 || n.Service != 0 {
		t.Errorf("notice = %+v", n)
	}
}

func TestUDPCheck(t *testing.T) {
	conf := "virtual_server 192.0.2.1 53 {\n protocol UDP\n real_server 10.0.0.1 53 { inhibit_on_failure\n UDP_CHECK {\n payload 0a0b\n require_reply 0c0d\n delay_before_retry 2 } }\n}\n"
	r := mustImport(t, conf, false)
	c := r.Document.Services[0].Check
	if c == nil || c.Send != "hex:0a0b" || c.ExpectBytes != "hex:0c0d" {
		t.Errorf("udp check: %+v", c)
	}
	if n := hasNotice(r, "delay_before_retry"); n == nil || n.Lossy {
		t.Errorf("delay_before_retry notice: %+v", n)
	}
	if _, err := imp(t, strings.Replace(conf, "require_reply 0c0d", "", 1), false); err == nil || !strings.Contains(err.Error(), "keepalived.conf:4") {
		t.Errorf("UDP_CHECK without require_reply: err = %v, want a lossy error at line 4", err)
	}
}

// TestWriteReadBack writes a conversion as YAML and reads it with
// rules/desired.Read: the same services and checks come back.
func TestWriteReadBack(t *testing.T) {
	r := mustImport(t, basic+strings.ReplaceAll(strings.ReplaceAll(basic, "192.0.2.10", "192.0.2.11"), "inhibit_on_failure", "frob"), false)
	var buf bytes.Buffer
	if err := WriteYAML(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.HasPrefix(out, "# Desired state for lvsctl run, converted from the keepalived configuration ") || !strings.Contains(out, "  # note: ") {
		t.Errorf("header or notice comments missing:\n%s", out)
	}
	set, h, err := desired.Read("out.yaml", strings.NewReader(out), nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(set.Services) != 2 || len(set.Services[0].Dests) != 2 {
		t.Fatalf("read back %d services", len(set.Services))
	}
	if h == nil || len(h.Checks) != 4 {
		t.Fatalf("read back checks: %+v", h)
	}
	for ref, specs := range h.Checks {
		spec := specs[0]
		if spec.Type != "tcp" || spec.Port != 8080 || spec.Fall != 3 || spec.Rise != 1 || spec.Interval != "6s" {
			t.Errorf("%v: %+v", ref, spec)
		}
	}
	again := desired.ToDocument(set, desired.Counters{})
	for i, s := range again.Services {
		w := r.Document.Services[i]
		if s.Address != w.Address || *s.Port != *w.Port || s.Scheduler != w.Scheduler || len(s.Destinations) != len(w.Destinations) ||
			!reflect.DeepEqual(s.Persistence, w.Persistence) {
			t.Errorf("service %d read back as %+v, want %+v", i, s, w)
		}
		for j, d := range s.Destinations {
			wd := w.Destinations[j]
			if d.Address != wd.Address || d.Port != wd.Port || d.Weight != wd.Weight || d.Method != wd.Method || d.UpperThreshold != wd.UpperThreshold {
				t.Errorf("service %d real server %d: %+v, want %+v", i, j, d, wd)
			}
		}
	}
}

// TestCorpus converts every configuration of the oracle corpus (the
// sample configurations Debian's keepalived ships among them), with
// --lossy where the case says so, and reads the YAML back: the lab's
// TestKeepalivedOracle compares what they do with keepalived's.
func TestCorpus(t *testing.T) {
	paths, err := filepath.Glob("testdata/oracle/*.conf")
	if err != nil || len(paths) < 40 {
		t.Fatalf("%d configurations in testdata/oracle, want at least 40 (%v)", len(paths), err)
	}
	debian := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lossy := strings.Contains(string(data), "\n# oracle-lossy\n") || strings.HasPrefix(string(data), "# oracle-lossy\n")
		if strings.HasPrefix(filepath.Base(p), "debian-") {
			debian++
		}
		r, err := Import(p, Options{Lossy: lossy})
		if err != nil {
			if !strings.Contains(err.Error(), "no virtual server with real servers") || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %v", p, err)
			}
			continue
		}
		changed := 0
		for _, n := range r.Notices {
			if n.Lossy {
				changed++
			}
		}
		if lossy != (changed > 0) {
			t.Errorf("%s: marked lossy %v, %d changes", p, lossy, changed)
		}
		if !lossy {
			if _, err := Import(p, Options{}); err != nil {
				t.Errorf("%s: without --lossy: %v", p, err)
			}
		}
		planAccepts(t, p, r)
	}
	if debian != 25 {
		t.Errorf("%d of Debian's 25 sample configurations in the corpus", debian)
	}
}

func TestTunnelSettings(t *testing.T) {
	r := mustImport(t, `virtual_server 192.0.2.1 80 {
  protocol TCP
  lvs_method TUN type gue port 6080 remcsum
  real_server 10.0.0.1 80 { }
  real_server 10.0.0.2 80 {
    lvs_method TUN type gre
  }
  real_server 10.0.0.3 80 {
    lvs_method NAT
  }
}`, false)
	d := r.Document.Services[0].Destinations
	if d[0].Method != "tunnel" || !reflect.DeepEqual(d[0].Tunnel, &desired.JSONTunnel{Type: "gue", Port: 6080, Checksum: "remcsum"}) {
		t.Errorf("gue: %+v %+v", d[0], d[0].Tunnel)
	}
	if d[1].Method != "tunnel" || !reflect.DeepEqual(d[1].Tunnel, &desired.JSONTunnel{Type: "gre", Checksum: "nocsum"}) {
		t.Errorf("gre: %+v %+v", d[1], d[1].Tunnel)
	}
	if d[2].Method != "masq" || d[2].Tunnel != nil {
		t.Errorf("nat: %+v", d[2])
	}
	// check_parser.c svr_forwarding_handler: the method is set before the
	// tunnel options are read; options that do not fit leave the tunnel.
	for _, bad := range []string{"TUN type gue", "TUN type gre remcsum", "TUN type vxlan"} {
		r := mustImport(t, "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  lvs_method "+bad+"\n  real_server 10.0.0.1 80 { }\n}\n", false)
		if n := hasNotice(r, "lvs_method"); n == nil || n.Line != 3 || !strings.Contains(n.Msg, "keeps the method TUN") {
			t.Errorf("lvs_method %s: notice %+v", bad, n)
		}
		if d := r.Document.Services[0].Destinations[0]; d.Method != "tunnel" || d.Tunnel != nil {
			t.Errorf("lvs_method %s: %+v", bad, d)
		}
	}
}
