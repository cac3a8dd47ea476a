package health

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestSpecFromJSON(t *testing.T) {
	doc := `{"type":"https","port":8443,"interval":"5s","timeout":"2s","rise":1,"fall":5,
		"path":"/health?full=1","host":"www.example.com","expect":"200,204","tls_skip_verify":true,"sni":"api.example.com","via":"vip"}`
	var s Spec
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	want := Spec{Type: "https", Port: 8443, Interval: "5s", Timeout: "2s", Rise: 1, Fall: 5,
		Path: "/health?full=1", Host: "www.example.com", Expect: "200,204", TLSSkipVerify: true,
		SNI: "api.example.com", Via: "vip"}
	if s.Key() != want.Key() {
		t.Errorf("decoded %+v, want %+v", s, want)
	}
	// port with via vip is refused; without the port the document is valid.
	if err := s.Validate(); err == nil || !strings.HasPrefix(err.Error(), "port:") {
		t.Errorf("Validate with port and via vip = %v, want a port error", err)
	}
	s.Port = 0
	if err := s.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for _, doc := range []string{
		`{"type":"dns","query":"www.example.com","record":"AAAA"}`,
		`{"type":"udp","send":"hex:00ff","expect_bytes":"pong"}`,
		`{"type":"exec","command":["/bin/true","-x"],"user":"nobody"}`,
		`{"type":"smtp","port":587,"helo":"lb1.example.com"}`,
		`{"type":"ping","via":"direct"}`,
	} {
		var s Spec
		if err := json.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != doc {
			t.Errorf("round trip of %s gave %s", doc, b)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		in, want Spec
	}{
		{Spec{Type: "tcp"}, Spec{Type: "tcp", Interval: "2s", Timeout: "1s", Rise: 2, Fall: 3, Via: "direct"}},
		{Spec{Type: "http", Interval: "500ms"}, Spec{Type: "http", Interval: "500ms", Timeout: "250ms", Rise: 2, Fall: 3,
			Via: "direct", Path: "/", Expect: "200-399"}},
		{Spec{Type: "dns", Query: "a."}, Spec{Type: "dns", Interval: "2s", Timeout: "1s", Rise: 2, Fall: 3,
			Via: "direct", Query: "a.", Record: "A"}},
		{Spec{Type: "exec", Command: []string{"/bin/true"}}, Spec{Type: "exec", Interval: "2s", Timeout: "1s",
			Rise: 2, Fall: 3, Command: []string{"/bin/true"}, User: "nobody"}},
		{Spec{Type: "smtp"}, Spec{Type: "smtp", Interval: "2s", Timeout: "1s", Rise: 2, Fall: 3, Via: "direct",
			Helo: "smtpchecker.keepalived.org"}},
		{Spec{Type: "ping"}, Spec{Type: "ping", Interval: "2s", Timeout: "1s", Rise: 2, Fall: 3, Via: "direct"}},
	} {
		got := tc.in.WithDefaults()
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(tc.want)
		if string(gj) != string(wj) {
			t.Errorf("WithDefaults(%+v) = %s, want %s", tc.in, gj, wj)
		}
	}
}

func TestSpecKey(t *testing.T) {
	a := Spec{Type: "tcp"}
	b := Spec{Type: "tcp", Interval: "2000ms", Timeout: "1s", Rise: 2, Fall: 3, Via: "direct"}
	if a.Key() != b.Key() {
		t.Errorf("equal specs have keys %s and %s", a.Key(), b.Key())
	}
	for _, c := range []Spec{
		{Type: "tcp", Interval: "3s"}, {Type: "tcp", Rise: 1}, {Type: "http"}, {Type: "tcp", Via: "vip"},
	} {
		if c.Key() == a.Key() {
			t.Errorf("%+v has the key of %+v", c, a)
		}
	}
	if (Spec{Type: "dns", Query: "x", Record: "aaaa"}).Key() != (Spec{Type: "dns", Query: "x", Record: "AAAA"}).Key() {
		t.Error("record spellings differ in key")
	}
	// A url's omitted expect is the default; a digest's case does not
	// count; the given spec keeps its urls as they were.
	given := Spec{Type: "http", URLs: []URL{{Path: "/a", Digest: []string{"9B3A0C85A887A256D6939DA88AADD8CD"}}}}
	spelled := Spec{Type: "http", URLs: []URL{{Path: "/a", Expect: DefaultExpect, Digest: []string{"9b3a0c85a887a256d6939da88aadd8cd"}}}}
	if given.Key() != spelled.Key() {
		t.Errorf("url spellings differ in key: %s and %s", given.Key(), spelled.Key())
	}
	if given.URLs[0].Expect != "" || given.URLs[0].Digest[0] != "9B3A0C85A887A256D6939DA88AADD8CD" {
		t.Errorf("Key changed its spec's urls: %+v", given.URLs)
	}
	if d := given.WithDefaults(); d.Path != "" || d.Expect != "" {
		t.Errorf("defaults of a check with urls: path %q, expect %q, want none", d.Path, d.Expect)
	}
	for _, c := range []Spec{
		{Type: "http", URLs: []URL{{Path: "/a"}}},
		{Type: "http", URLs: []URL{{Path: "/a", Digest: []string{"00000000000000000000000000000000"}}}},
		{Type: "exec", Command: []string{"/bin/true"}, Dynamic: true},
	} {
		if c.Key() == given.Key() || c.Key() == (Spec{Type: "exec", Command: []string{"/bin/true"}}).Key() {
			t.Errorf("%+v shares a key it should not", c)
		}
	}
}

// fakeSystem answers for the real files as if root owned them and no group
// or other could write them, but for those listed in bad.
func fakeSystem(bad map[string]FileInfo) System {
	return System{
		Stat: func(name string) (FileInfo, error) {
			if fi, ok := bad[name]; ok {
				return fi, nil
			}
			fi, err := os.Stat(name)
			if err != nil {
				return FileInfo{}, err
			}
			return FileInfo{Mode: fi.Mode() &^ 0o022}, nil
		},
		LookupUser: func(name string) (uint32, uint32, error) {
			if name == "nobody" || name == "checker" {
				return 65534, 65534, nil
			}
			return 0, 0, errors.New("no such user")
		},
		EUID: func() int { return 1000 },
	}
}

func TestValidateErrors(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "check")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(data, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sys := fakeSystem(nil)
	for _, tc := range []struct {
		spec Spec
		want string // "" for valid
	}{
		{Spec{Type: "tcp"}, ""},
		{Spec{}, "type: missing (tcp, http, https, dns, udp, smtp, ping or exec)"},
		{Spec{Type: "ftp"}, `type "ftp": tcp, http, https, dns, udp, smtp, ping or exec`},
		{Spec{Type: "tcp", Interval: "2x"}, `interval: "2x": not a duration`},
		{Spec{Type: "tcp", Timeout: "soon"}, `timeout: "soon": not a duration`},
		{Spec{Type: "tcp", Timeout: "3s"}, "timeout 3s must be shorter than interval 2s"},
		{Spec{Type: "tcp", Interval: "-1s"}, "interval -1s must be positive"},
		{Spec{Type: "tcp", Interval: "10ms", Timeout: "5ms"}, "interval 10ms must be at least 100ms"},
		{Spec{Type: "tcp", Rise: -1}, "rise must be at least 1"},
		{Spec{Type: "tcp", Fall: -2}, "fall must be at least 1"},
		{Spec{Type: "tcp", Port: 70000}, "port 70000: 0 to 65535"},
		{Spec{Type: "tcp", Via: "tunnel"}, `via "tunnel": direct or vip`},
		{Spec{Type: "tcp", Path: "/x"}, "path: not for tcp checks (only http, https)"},
		{Spec{Type: "http", SNI: "x"}, "sni: not for http checks (only https)"},
		{Spec{Type: "exec", Command: []string{prog}, Port: 80}, "port: not for exec checks (only tcp, http, https, dns, udp, smtp)"},
		{Spec{Type: "http", Path: "health"}, `path "health": must start with /`},
		{Spec{Type: "http", Expect: "2xx"}, `expect "2xx": a status, a range or a list ("200", "200-399", "200,204,300-399")`},
		{Spec{Type: "http", Expect: "399-200"}, `expect "399-200": statuses run from 100 to 599, low to high`},
		{Spec{Type: "http", Expect: "200,204,300-399"}, ""},
		{Spec{Type: "https", CA: data, TLSSkipVerify: true}, "ca: not with tls_skip_verify"},
		{Spec{Type: "https", CA: data}, "ca: " + data + ": no PEM certificate"},
		{Spec{Type: "https", CA: filepath.Join(dir, "none")}, "ca: " + filepath.Join(dir, "none") + ": no such file or directory"},
		{Spec{Type: "dns"}, "query: missing (the name a dns check asks for)"},
		{Spec{Type: "dns", Query: "x", Record: "XYZ"}, `record "XYZ": A, AAAA, CNAME, MX, NS, PTR, SOA, SRV or TXT`},
		{Spec{Type: "dns", Query: "www.example.com", Record: "aaaa"}, ""},
		{Spec{Type: "udp", Send: "hex:zz"}, `send "hex:zz": bad hex digits`},
		{Spec{Type: "udp", ExpectBytes: "hex:0"}, `expect_bytes "hex:0": bad hex digits`},
		{Spec{Type: "exec"}, "command: missing (the program and its arguments)"},
		{Spec{Type: "exec", Command: []string{"check.sh"}}, `command: "check.sh" is not an absolute path`},
		{Spec{Type: "exec", Command: []string{prog + "x"}}, `command: "` + prog + `x": no such file or directory`},
		{Spec{Type: "exec", Command: []string{data}}, `command: "` + data + `" is not executable`},
		{Spec{Type: "exec", Command: []string{dir}}, `command: "` + dir + `" is not a regular file`},
		{Spec{Type: "exec", Command: []string{prog}, User: "nosuch"}, `user "nosuch": no such user`},
		{Spec{Type: "exec", Command: []string{prog}, Via: "vip"}, "via: not for exec checks (only tcp, http, https, dns, udp, smtp, ping)"},
		{Spec{Type: "smtp", Helo: "lb1.example.com", Port: 587, Via: "vip"}, "port: not with via vip (the probe goes to the service's port)"},
		{Spec{Type: "smtp", Helo: "lb1.example.com", Via: "vip"}, ""},
		{Spec{Type: "smtp", Helo: "a\r\nMAIL FROM:<x>"}, `helo "a\r\nMAIL FROM:<x>": holds a control character`},
		{Spec{Type: "smtp", Helo: strings.Repeat("a", 256)}, "helo: 256 bytes, at most 255"},
		{Spec{Type: "tcp", Helo: "x"}, "helo: not for tcp checks (only smtp)"},
		{Spec{Type: "ping"}, ""},
		{Spec{Type: "ping", Via: "direct"}, ""},
		{Spec{Type: "ping", Via: "vip"}, "via vip: not for ping checks (IPVS forwards no ICMP echo: the director answers for its VIP itself)"},
		{Spec{Type: "ping", Port: 7}, "port: not for ping checks (only tcp, http, https, dns, udp, smtp)"},
		{Spec{Type: "exec", Command: []string{prog, "arg"}}, ""},
		{Spec{Type: "exec", Command: []string{prog}, Dynamic: true}, ""},
		{Spec{Type: "tcp", Dynamic: true}, "dynamic: not for tcp checks (only exec)"},
		{Spec{Type: "http", URLs: []URL{{Path: "/a"}, {Path: "/b", Expect: "200", Digest: []string{"9B3A0C85A887A256D6939DA88AADD8CD"}}}}, ""},
		{Spec{Type: "tcp", URLs: []URL{{Path: "/a"}}}, "urls: not for tcp checks (only http, https)"},
		{Spec{Type: "http", Path: "/a", URLs: []URL{{Path: "/a"}}}, "urls: not with path or expect (each url has its own)"},
		{Spec{Type: "http", Expect: "200", URLs: []URL{{Path: "/a"}}}, "urls: not with path or expect (each url has its own)"},
		{Spec{Type: "http", URLs: []URL{{Path: "/a"}, {Expect: "200"}}}, "urls[1].path: missing (the request's path)"},
		{Spec{Type: "http", URLs: []URL{{Path: "a"}}}, `urls[0].path "a": must start with /`},
		{Spec{Type: "http", URLs: []URL{{Path: "/a", Expect: "2xx"}}}, `urls[0].expect "2xx": a status, a range or a list ("200", "200-399", "200,204,300-399")`},
		{Spec{Type: "http", URLs: []URL{{Path: "/a", Digest: []string{"9b3a0c85a887a256d6939da88aadd8cd", "9b3a"}}}}, `urls[0].digest[1] "9b3a": not an MD5 digest (32 hex digits)`},
		{Spec{Type: "http", URLs: []URL{{Path: "/a", Digest: []string{"zz3a0c85a887a256d6939da88aadd8cd"}}}}, `urls[0].digest[0] "zz3a0c85a887a256d6939da88aadd8cd": not an MD5 digest (32 hex digits)`},
	} {
		err := tc.spec.ValidateWith(sys)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%+v: Validate = %q, want %q", tc.spec, got, tc.want)
		}
	}
}

// TestValidateProgramSecurity runs the real host checks on programs in
// the test's directories (which live under a world-writable /tmp), then
// the ownership and mode rules with the parents faked safe.
func TestValidateProgramSecurity(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(open, "check")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Type: "exec", Command: []string{prog}}
	want := `command: "` + prog + `": directory ` + open + " is writable by group or others"
	if err := spec.Validate(); err == nil || err.Error() != want {
		t.Errorf("program in a world-writable directory: Validate = %v, want %s", err, want)
	}
	// Faked safe everywhere but the world-writable directory, which the
	// real stat reports.
	sys := fakeSystem(map[string]FileInfo{open: {Mode: fs.ModeDir | 0o777}})
	if err := spec.ValidateWith(sys); err == nil || err.Error() != want {
		t.Errorf("ValidateWith = %v, want %s", err, want)
	}

	// A link from a safe directory to the program is followed.
	safe := filepath.Join(dir, "safe")
	if err := os.Mkdir(safe, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(safe, "check")
	if err := os.Symlink(prog, link); err != nil {
		t.Fatal(err)
	}
	if err := (Spec{Type: "exec", Command: []string{link}}).ValidateWith(sys); err == nil || !strings.Contains(err.Error(), open+" is writable") {
		t.Errorf("link to an unsafe program: %v, want a refusal naming %s", err, open)
	}

	for _, tc := range []struct {
		fi   FileInfo
		want string
	}{
		{FileInfo{Mode: 0o775}, prog + " is writable by group or others"},
		{FileInfo{Mode: 0o757}, prog + " is writable by group or others"},
		{FileInfo{Mode: 0o755, UID: 1001}, prog + " is owned by uid 1001, not root or the running user"},
		{FileInfo{Mode: 0o755, UID: 1000}, ""}, // the running user, as fakeSystem has it
		{FileInfo{Mode: 0o700}, ""},
	} {
		sys := fakeSystem(map[string]FileInfo{prog: tc.fi, open: {Mode: fs.ModeDir | 0o755}})
		err := spec.ValidateWith(sys)
		if tc.want == "" {
			if err != nil {
				t.Errorf("program %+v: %v", tc.fi, err)
			}
			continue
		}
		if want := `command: "` + prog + `": ` + tc.want; err == nil || err.Error() != want {
			t.Errorf("program %+v: Validate = %v, want %s", tc.fi, err, want)
		}
	}
	sys = fakeSystem(map[string]FileInfo{dir: {Mode: fs.ModeDir | 0o755, UID: 4242}, open: {Mode: fs.ModeDir | 0o755}})
	want = `command: "` + prog + `": directory ` + dir + " is owned by uid 4242, not root or the running user"
	if err := spec.ValidateWith(sys); err == nil || err.Error() != want {
		t.Errorf("directory owned by another user: %v, want %s", err, want)
	}

	// A system program passes the real checks.
	if err := (Spec{Type: "exec", Command: []string{"/bin/true"}, User: "root"}).Validate(); err != nil {
		t.Errorf("/bin/true: %v", err)
	}
}

// Keys gives each target the key Target.Key gives it, through runs of
// equal specs and changes between them.
func TestKeysAsKey(t *testing.T) {
	a := Spec{Type: "tcp", Interval: "2s"}
	b := Spec{Type: "http", Path: "/x"}
	e := Spec{Type: "exec", Command: []string{"/bin/true"}}
	var ts []Target
	for i, s := range []Spec{a, a, b, b, a, e, e, {Type: "tcp", Interval: "2s", Port: 81}} {
		ts = append(ts, Target{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 80), Spec: s})
	}
	var k Keys
	var prev *Spec
	for i, tg := range ts {
		if got, want := k.Key(tg), tg.Key(); got != want {
			t.Errorf("%v: key %+v, want %+v", tg.Addr, got, want)
		}
		sp := k.Spec()
		if sp == nil || !reflect.DeepEqual(*sp, tg.Spec) {
			t.Fatalf("%v: Spec %+v, want %+v", tg.Addr, sp, tg.Spec)
		}
		if same := i > 0 && reflect.DeepEqual(ts[i-1].Spec, tg.Spec); (sp == prev) != same {
			t.Errorf("%v: Spec shared with the previous target %v, want %v", tg.Addr, sp == prev, same)
		}
		prev = sp
	}
}

// TestSpecEqual: equal tells apart two specs that differ in any one
// field, as reflect.DeepEqual does; a field added to Spec and not to
// equal fails here.
func TestSpecEqual(t *testing.T) {
	base := Spec{}
	bv := reflect.ValueOf(&base).Elem()
	for i := range bv.NumField() {
		setField(t, bv.Field(i))
	}
	if c := base; !base.equal(&c) {
		t.Fatal("a spec differs from its copy")
	}
	for i := range bv.NumField() {
		o := base
		o.Command = slices.Clone(base.Command)
		setField(t, reflect.ValueOf(&o).Elem().Field(i))
		if base.equal(&o) || o.equal(&base) {
			t.Errorf("specs differing in %s are equal", bv.Type().Field(i).Name)
		}
	}
	a, b := Spec{Type: "exec"}, Spec{Type: "exec", Command: []string{}}
	if a.equal(&b) != reflect.DeepEqual(a, b) {
		t.Errorf("nil and empty commands: equal %v, DeepEqual %v", a.equal(&b), reflect.DeepEqual(a, b))
	}
}

// TestTargetIsZero: IsZero is reflect's, field by field, the spec's
// included.
func TestTargetIsZero(t *testing.T) {
	if z := (Target{}); !z.IsZero() {
		t.Error("the zero Target is not zero")
	}
	set := map[string]func(*Target){
		"Addr":    func(x *Target) { x.Addr = netip.MustParseAddrPort("0.0.0.0:0") },
		"Mark":    func(x *Target) { x.Mark = 1 },
		"Through": func(x *Target) { x.Through = netip.IPv4Unspecified() },
		"VIP":     func(x *Target) { x.VIP = netip.MustParseAddrPort("[::]:0") },
		"Env":     func(x *Target) { x.Env = map[string]string{} },
		"Spec":    func(x *Target) {},
	}
	tt := reflect.TypeFor[Target]()
	for i := range tt.NumField() {
		name := tt.Field(i).Name
		f, ok := set[name]
		if !ok {
			t.Fatalf("Target.%s: teach IsZero and this test", name)
		}
		if name == "Spec" {
			for j := range reflect.TypeFor[Spec]().NumField() {
				var x Target
				setField(t, reflect.ValueOf(&x.Spec).Elem().Field(j))
				if x.IsZero() || reflect.ValueOf(x).IsZero() {
					t.Errorf("a Target with Spec.%s set is zero", reflect.TypeFor[Spec]().Field(j).Name)
				}
			}
			continue
		}
		var x Target
		f(&x)
		if x.IsZero() != reflect.ValueOf(x).IsZero() {
			t.Errorf("a Target with %s set: IsZero %v, reflect %v", name, x.IsZero(), reflect.ValueOf(x).IsZero())
		}
	}
	empty := Target{Spec: Spec{Command: []string{}}}
	if empty.IsZero() != reflect.ValueOf(empty).IsZero() {
		t.Error("an empty command: IsZero differs from reflect's")
	}
}

// setField changes v to another value of its kind.
func setField(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int:
		v.SetInt(v.Int() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Slice:
		switch v.Type().Elem().Kind() {
		case reflect.String:
			v.Set(reflect.Append(v, reflect.ValueOf("x")))
		case reflect.Struct:
			v.Set(reflect.Append(v, reflect.ValueOf(URL{Path: "/x"})))
		default:
			t.Fatalf("slice of %s: teach setField and Spec.equal", v.Type().Elem())
		}
	default:
		t.Fatalf("field of kind %s: teach setField and Spec.equal", v.Kind())
	}
}
