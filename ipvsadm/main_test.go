package ipvsadm

import (
	"errors"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
	"golang.org/x/sys/unix"
)

const initFailure = "Can't initialize ipvs: %s\nAre you sure that IP Virtual Server is built in the kernel or as module?\n"

func TestInitialisation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		openErrs  []error // errors of successive Open calls; then success
		modprobe  error
		wantCalls int // modprobe calls
		stderr    string
		status    int
	}{
		{"no module", []error{unix.ENOPROTOOPT, unix.ENOPROTOOPT}, errors.New("exit status 1"), 1,
			strings.Replace(initFailure, "%s", "Protocol not available", 1), 2},
		{"module loaded by modprobe", []error{unix.ENOPROTOOPT}, nil, 1, "", 0},
		{"still missing after modprobe", []error{unix.ENOPROTOOPT, &ipvs.OpError{Op: ipvs.CmdGetInfo, Err: unix.ENOENT}}, nil, 1,
			strings.Replace(initFailure, "%s", "No such file or directory", 1), 2},
		{"not root", []error{&ipvs.OpError{Op: ipvs.CmdGetInfo, Err: unix.EPERM}, &ipvs.OpError{Op: ipvs.CmdGetInfo, Err: unix.EPERM}}, nil, 1,
			strings.Replace(initFailure, "%s", "Permission denied (you must be root)", 1), 2},
		{"works", nil, nil, 0, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Even -h is only looked at once the kernel answered.
			calls, opens := 0, 0
			var out, errb strings.Builder
			status := Main([]string{"ipvsadm", "-h"}, strings.NewReader(""), &out, &errb, Env{
				Open: func() (ipvs.Client, error) {
					opens++
					if opens <= len(tc.openErrs) {
						return nil, tc.openErrs[opens-1]
					}
					return ipvstest.New(), nil
				},
				Modprobe: func() error { calls++; return tc.modprobe },
				Resolver: testResolver(t),
			})
			if calls != tc.wantCalls || errb.String() != tc.stderr || status != tc.status {
				t.Errorf("modprobe calls %d, status %d, stderr %q", calls, status, errb.String())
			}
			if (status == 0) != (out.String() == cmdline.Usage("ipvsadm")) {
				t.Errorf("stdout %q", out.String())
			}
		})
	}
}

func TestInfoFailureAndOldVersion(t *testing.T) {
	f := ipvstest.New()
	f.FailNext(ipvs.CmdGetInfo, unix.EPERM)
	f.FailNext(ipvs.CmdGetInfo, unix.EPERM)
	r := run(t, f, "-v")
	if r.status != 2 || r.stderr != strings.Replace(initFailure, "%s", "Permission denied (you must be root)", 1) {
		t.Errorf("%+v", r)
	}
	old := ipvstest.New(ipvstest.WithInfo(ipvs.Info{Version: 0x010103, ConnTabSize: 4096}))
	r = run(t, old, "-v")
	want := "Warning: IPVS version mismatch: \n  Kernel compiled with IPVS version 1.1.3\n  ipvsadm v1.31  requires minimum IPVS version 1.1.4\n\n"
	if r.status != 0 || r.stderr != want || r.stdout != cmdline.VersionLine+"\n" {
		t.Errorf("%+v", r)
	}
}

func TestHelpUsesProgramName(t *testing.T) {
	u := cmdline.Usage("/usr/sbin/ipvsadm")
	if len(cmdline.Usage("ipvsadm")) != 4645 || strings.Count(cmdline.Usage("ipvsadm"), "\n") != 82 {
		t.Errorf("usage is %d bytes, %d lines", len(cmdline.Usage("ipvsadm")), strings.Count(cmdline.Usage("ipvsadm"), "\n"))
	}
	if strings.Count(u, "  /usr/sbin/ipvsadm -") != 13 || !strings.HasPrefix(u, cmdline.VersionLine+"\nUsage:\n") {
		t.Errorf("usage: %s", u)
	}
}

func TestRequests(t *testing.T) {
	p := &Program{Resolver: testResolver(t)}
	request := func(argv ...string) ipvs.Request {
		t.Helper()
		inv, o := p.Parse(append([]string{"ipvsadm"}, argv...))
		if o != nil {
			t.Fatalf("%v: %+v", argv, *o)
		}
		req, ok := inv.Request()
		if !ok {
			t.Fatalf("%v: no request", argv)
		}
		return req
	}
	for _, zeroAll := range [][]string{{"-Z"}, {"-Z", "-t", "0.0.0.0:0"}, {"-Z", "-t", "[::]:0"}, {"-Z", "-u", "0.0.0.0"}} {
		if req := request(zeroAll...); req.Cmd != ipvs.CmdZero || req.Service != nil {
			t.Errorf("%v: %+v", zeroAll, req)
		}
	}
	if req := request("-Z", "-t", "0.0.0.0:1"); req.Service == nil || req.Service.Port != 1 {
		t.Errorf("-Z -t 0.0.0.0:1: %+v", req)
	}
	req := request("-A", "-f", "1", "-s", "sh", "-b", "sh-fallback,sh-port", "-p", "600", "-M", "255.255.255.0")
	want := ipvs.Service{Family: ipvs.AFInet, FWMark: 1, Scheduler: "sh", Flags: 0x19, Timeout: 600, Netmask: 0xffffff00}
	if req.Cmd != ipvs.CmdNewService || *req.Service != want {
		t.Errorf("fwmark service: %+v", *req.Service)
	}
	req = request("-E", "-t", "10.0.0.1:22")
	if req.Cmd != ipvs.CmdSetService || req.Service.Scheduler != "wlc" || req.Service.Flags != 0 || req.Service.Netmask != 0xffffffff {
		t.Errorf("-E: %+v", *req.Service)
	}
	req = request("--stop-daemon", "backup", "--syncid", "7")
	if req.Cmd != ipvs.CmdDelDaemon || *req.Daemon != (ipvs.Daemon{State: ipvs.DaemonBackup, SyncID: 7}) {
		t.Errorf("stop daemon: %+v", *req.Daemon)
	}
	req = request("--set", "0", "30", "0")
	if req.Cmd != ipvs.CmdSetConfig || *req.Timeouts != (ipvs.Timeouts{TCPFin: 30}) {
		t.Errorf("--set: %+v", req)
	}
	req = request("-d", "-f", "1", "-6", "-r", "2001:db8::5")
	if req.Cmd != ipvs.CmdDelDest || req.Service.Family != ipvs.AFInet6 || req.Dest.Family != ipvs.AFInet6 || req.Dest.Port != 0 {
		t.Errorf("-d: %+v %+v", *req.Service, *req.Dest)
	}
	for _, argv := range [][]string{{"-L"}, {"-S"}, {"-R"}} {
		inv, _ := p.Parse(append([]string{"ipvsadm"}, argv...))
		if _, ok := inv.Request(); ok {
			t.Errorf("%v has a request", argv)
		}
	}
}

func TestListingErrors(t *testing.T) {
	f := ipvstest.New()
	if r := run(t, f, "-L", "-t", "10.9.9.9:80"); r.status != 1 || r.stderr != "No such service\n" || r.stdout != "" {
		t.Errorf("-L missing service: %+v", r)
	}
	f.FailNext(ipvs.CmdGetConfig, unix.EPERM)
	if r := run(t, f, "-L", "--timeout"); r.status != 1 || r.stderr != "" || r.stdout != "" {
		t.Errorf("--timeout failure: %+v", r)
	}
	f.FailNext(ipvs.CmdGetDaemon, unix.EPERM)
	if r := run(t, f, "-L", "--daemon"); r.status != 1 || r.stderr != "" {
		t.Errorf("--daemon failure: %+v", r)
	}
	// The header comes before the failing fetch.
	f.FailNext(ipvs.CmdGetService, unix.ENOMEM)
	if r := run(t, f, "-Ln"); r.status != 1 || r.stderr != "Memory allocation problem\n" || r.stdout != "IP Virtual Server version 1.2.1 (size=4096)\n" {
		t.Errorf("-Ln failure: %+v", r)
	}
	if r := run(t, f, "-L", "-c"); r.status != 1 || !strings.HasPrefix(r.stderr, "cannot open file ") {
		t.Errorf("-L -c without the file: %+v", r)
	}
}

func TestNoArgumentsListsAll(t *testing.T) {
	f := ipvstest.New()
	run(t, f, "-A", "-t", "10.0.0.1:80")
	r := run(t, f)
	want := "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\nTCP  vip1.example.com:http wlc\n"
	if r.status != 0 || r.stdout != want || r.stderr != "" {
		t.Errorf("%+v", r)
	}
}

func TestCrashLosesBufferedOutput(t *testing.T) {
	f := ipvstest.New()
	r := runWith(t, f, "-L -n\n-A -t 1.2.3.4:80 -b ,\n-A -t 1.2.3.5:80\n", "-R")
	if r.status != cmdline.StatusCrash || r.stdout != "" || r.stderr != "" {
		t.Errorf("%+v", r)
	}
	if r := run(t, f, "-L", "-n", "-t", "1.2.3.5:80"); r.status != 1 {
		t.Errorf("restore went on after the crash: %+v", r)
	}
}

func TestRestoreReader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // lines, tokens joined by '|'
	}{
		{"", nil},
		{"\n\n", []string{"", ""}},
		{"ipvsadm -A -t 1.1.1.1:80\n\n   \n\t-A -t 1.1.1.2:80 -s rr\r\n-A\t-t 1.1.1.3:80   -p 10  \n-A ipvsadm -t 1.1.1.4:80\nipvsadm\n",
			[]string{"-A|-t|1.1.1.1:80", "", "", "-A|-t|1.1.1.2:80|-s|rr", "-A|-t|1.1.1.3:80|-p|10", "-A|-t|1.1.1.4:80", ""}},
		{"-A -t 1.1.1.1:80", []string{"-A|-t|1.1.1.1:80"}},
		{"-A -t 1.1.1.1:80   ", nil},
		{"-A -t 1.1.1.1:80\n-A -t 1.1.1.2:80   ", []string{"-A|-t|1.1.1.1:80"}},
		{"# a comment\n", []string{"#|a|comment"}},
		{"a\x00b c\n", []string{"a|c"}},
		{strings.Repeat("x", 4100) + "\n", []string{strings.Repeat("x", 4096) + "|xxxx"}},
	} {
		r := NewRestoreReader(strings.NewReader(tc.in))
		var got []string
		for {
			argv, ok := r.Next("ipvsadm")
			if !ok {
				break
			}
			if argv[0] != "ipvsadm" {
				t.Fatalf("argv[0] = %q", argv[0])
			}
			got = append(got, strings.Join(argv[1:], "|"))
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") || len(got) != len(tc.want) {
			t.Errorf("%q:\n got  %q\n want %q", tc.in, got, tc.want)
		}
	}
}

func TestRestoreOutcomes(t *testing.T) {
	for _, tc := range []struct {
		in, stdout, stderr string
		status             int
	}{
		{"", "", "", 0},
		{"-A -t 1.1.1.1:80\n-A -t 1.1.1.1:80\n-A -t 1.1.1.2:80\n", "", "Service already exists\n", 0},
		{"-A -t 1.1.1.1:80\n-A -t 1.1.1.2:80\n-A -t 1.1.1.1:80\n", "", "Service already exists\n", 255},
		{"-A -t 1.1.1.1:80\n-L --bogus\n-A -t 1.1.1.3:80\n", "", "--bogus: unknown option\n", 0},
		{"-A -t 1.1.1.1:80\n-R\n-A -t 1.1.1.3:80\n", "", "Try `ipvsadm -h' or 'ipvsadm --help' for more information.\n", 255},
		{"-A -t 1.1.1.1:80\n-A -t 1.1.1.2:99999\n-A -t 1.1.1.3:80\n", "", "illegal virtual server address[:port] specified\n", 2},
		{"-v\n-A -t 1.1.1.3:80\n", cmdline.VersionLine + "\n", "", 0},
		{"-L -t 9.9.9.9:80\n-A -t 1.1.1.3:80\n", "", "No such service\n", 1},
		{"-R -n\n", "", "Illegal 'numeric' option with the 'restore' command\n", 2},
	} {
		f := ipvstest.New()
		r := runWith(t, f, tc.in, "-R")
		if r.stdout != tc.stdout || r.stderr != tc.stderr || r.status != tc.status {
			t.Errorf("%q: got %d %q %q, want %d %q %q", tc.in, r.status, r.stdout, r.stderr, tc.status, tc.stdout, tc.stderr)
		}
	}
}

// TestRestoreEngineIsPluggable checks that -R runs the engine given in Env
// and that a nested -R is refused whatever the engine.
func TestRestoreEngineIsPluggable(t *testing.T) {
	f := ipvstest.New()
	var lines [][]string
	engine := func(p *Program, prog string) cmdline.Outcome {
		lines = append(lines, []string{prog})
		o := p.RunLine([]string{prog, "-R"})
		return cmdline.Outcome{Kind: o.Kind}
	}
	var out, errb strings.Builder
	status := Main([]string{"ipvsadm", "-R"}, strings.NewReader(""), &out, &errb, Env{
		Open: func() (ipvs.Client, error) { return keepOpen{f}, nil }, RestoreEngine: engine,
	})
	if len(lines) != 1 || status != 255 || !strings.HasPrefix(errb.String(), "Try `ipvsadm -h'") {
		t.Errorf("engine calls %d, status %d, stderr %q", len(lines), status, errb.String())
	}
}

// TestStdoutBuffering checks the order of listing text and messages when
// both streams go to one place: held back until exit for a pipe or file (as
// with the C library's full buffering), as produced for a terminal.
func TestStdoutBuffering(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		f := ipvstest.New()
		var both strings.Builder
		status := Main([]string{"ipvsadm", "-R"}, strings.NewReader("-L -n\n-A -t 1.2.3.4:80 --bogus\n"), &both, &both, Env{
			Open: func() (ipvs.Client, error) { return keepOpen{f}, nil }, Resolver: testResolver(t), StdoutIsTerminal: terminal,
		})
		listing := "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"
		want := "--bogus: unknown option\n" + listing
		if terminal {
			want = listing + "--bogus: unknown option\n"
		}
		if status != 255 || both.String() != want {
			t.Errorf("terminal %v: status %d\n%s", terminal, status, both.String())
		}
	}
}
