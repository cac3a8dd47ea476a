package lvsctl

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lvsctl/record"
	"github.com/lvskit/lvskit/lvsctl/top"
	"github.com/lvskit/lvskit/rules"
)

// The tests of top's frames run in synctest bubbles: frames --delay apart
// come at once.

func TestTopBatchFrames(t *testing.T) { synctest.Test(t, testTopBatchFrames) }

func testTopBatchFrames(t *testing.T) {
	f, env := seeded(t)
	svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: mustAddr("10.0.0.1"), Port: 80}
	d := ipvs.Destination{Family: ipvs.AFInet, Addr: mustAddr("192.168.1.1"), Port: 80}
	if err := f.SetDestinationCounters(svc, d, ipvs.DestCounters{ActiveConns: 7, Stats: ipvs.Stats{CPS: 12345, InBPS: 9876543}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, env, "", "top", "-b", "-n", "3", "-d", "0.1")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("top -b: %+v", r)
	}
	frames := strings.Split(strings.TrimSuffix(r.stdout, "\n\n"), "\n\n")
	if len(frames) != 3 || strings.ContainsRune(r.stdout, 0x1b) {
		t.Fatalf("want 3 frames without escapes, got %d:\n%q", len(frames), r.stdout)
	}
	for _, fr := range frames {
		lines := strings.Split(fr, "\n")
		// 3 services, 5 real servers, a header and the column line.
		if len(lines) != 2+3+5 || !strings.HasPrefix(lines[0], "lvsctl top - ") || !strings.Contains(lines[0], "3 services, 5 real servers  every 100ms") {
			t.Fatalf("frame:\n%s", fr)
		}
		if got := strings.Fields(lines[1]); strings.Join(got, " ") != "SERVICE SERVER STATE CPS INPPS OUTPPS INBPS OUTBPS ACTIVE INACT WEIGHT FWD" {
			t.Errorf("columns %q", got)
		}
		if !strings.Contains(strings.Join(strings.Fields(fr), " "), "192.168.1.1:80 in service 12345 0 0 9876543 0 7 0 3 masq") {
			t.Errorf("row of 192.168.1.1 (exact rates, as list --rate prints):\n%s", fr)
		}
	}
	// list --rate writes the same numbers.
	if l := run(t, env, "", "list", "--rate"); !strings.Contains(l.stdout, "| 12345 ") || !strings.Contains(l.stdout, "| 9876543 ") {
		t.Errorf("list --rate:\n%s", l.stdout)
	}
	// Sorted by cps, filtered.
	r = run(t, env, "", "top", "-b", "-n", "1", "--sort", "cps", "--reverse", "--filter", "10.0.0.1:")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 5 || !strings.HasPrefix(lines[2], "-t 10.0.0.1:80") ||
		!strings.Contains(lines[3], "192.168.1.2:80") || !strings.Contains(lines[4], "192.168.1.1:80") {
		t.Errorf("sorted and filtered:\n%s", r.stdout)
	}
	for _, bad := range [][]string{{"--sort", "colour"}, {"-d", "0.01"}, {"-d", "soon"}} {
		if r := run(t, env, "", append([]string{"top", "-b", "-n", "1"}, bad...)...); r.code != exitUsage {
			t.Errorf("top %q: %+v", bad, r)
		}
	}
}

func TestTopJSONFramesAndDrainState(t *testing.T) { synctest.Test(t, testTopJSONFramesAndDrainState) }

func testTopJSONFramesAndDrainState(t *testing.T) {
	f, env := seeded(t)
	svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoUDP, Addr: mustAddr("10.0.0.2"), Port: 53}
	leaving := ipvs.Destination{Family: ipvs.AFInet, Addr: mustAddr("192.168.1.4"), Port: 53}
	if err := f.SetDestinationCounters(svc, leaving, ipvs.DestCounters{InactConns: 4}); err != nil {
		t.Fatal(err)
	}
	// An apply interrupted mid-drain leaves the server in the journal.
	ctx, cancel := context.WithCancel(context.Background())
	applyEnv := env
	applyEnv.Context = ctx
	polls := 0
	applyEnv.Now = func() time.Time {
		if polls++; polls > 6 {
			cancel()
		}
		return time.Unix(1e9, 0)
	}
	without := strings.Replace(seedRules, "-a -u 10.0.0.2:53 -r 192.168.1.4:53 -g -w 1\n", "", 1)
	if r := run(t, applyEnv, without, "apply", "-"); r.code != exitInterrupted {
		t.Fatalf("apply: %+v", r)
	}
	env.Now = func() time.Time { return time.Unix(1e9+60, 0) }
	r := run(t, env, "", "top", "--json", "-n", "2", "-d", "100ms")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("top --json: %+v", r)
	}
	docs := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(docs) != 2 {
		t.Fatalf("want 2 JSON frames, got %d:\n%s", len(docs), r.stdout)
	}
	for _, doc := range docs {
		var fr struct {
			Version     int `json:"version"`
			RealServers int `json:"real_servers"`
			Services    []struct {
				Protocol     string `json:"protocol"`
				State        string `json:"state"`
				Destinations []struct {
					Address string `json:"address"`
					State   string `json:"state"`
					Stats   struct {
						Rate *struct{} `json:"rate"`
					} `json:"stats"`
				} `json:"destinations"`
			} `json:"services"`
		}
		if err := json.Unmarshal([]byte(doc), &fr); err != nil {
			t.Fatalf("frame is not JSON: %v\n%s", err, doc)
		}
		if fr.Version != 1 || len(fr.Services) != 3 || fr.RealServers != 5 || fr.Services[1].Protocol != "udp" {
			t.Fatalf("frame: %+v", fr)
		}
		states := map[string]string{}
		for _, s := range fr.Services {
			for _, d := range s.Destinations {
				states[d.Address] = d.State
				if d.Stats.Rate == nil {
					t.Errorf("%s has no rate", d.Address)
				}
			}
		}
		if states["192.168.1.4"] != "draining (4 conns, 240 s to deadline)" || states["192.168.1.1"] != "in service" {
			t.Errorf("states %v", states)
		}
	}
}

// A hang-up ends top, batch or full screen, with status 0: lvsctl's main
// catches SIGHUP (run reloads on it), and top must not outlive the
// terminal it drew on.
func TestTopEndsOnHangUp(t *testing.T) { synctest.Test(t, testTopEndsOnHangUp) }

func testTopEndsOnHangUp(t *testing.T) {
	_, env := seeded(t)
	hup := make(chan os.Signal, 1)
	env.Reload = hup
	done := make(chan result, 1)
	go func() { done <- run(t, env, "", "top", "-b", "-d", "0.1") }()
	time.Sleep(250 * time.Millisecond) // frames at 0, 100 and 200 ms
	synctest.Wait()
	hup <- syscall.SIGHUP
	synctest.Wait()
	select {
	case r := <-done:
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "lvsctl top - ") {
			t.Errorf("after SIGHUP: %+v", r)
		}
		if n := strings.Count(r.stdout, "lvsctl top - "); n != 3 {
			t.Errorf("%d frames in 250 ms, one every 100 ms from the start: want 3", n)
		}
	default:
		t.Fatal("top -b went on after SIGHUP")
	}
}

// The screen's refreshes read the services and the real servers of the
// services it shows; the others' come from the last read that had them,
// and every real server is read again after topFullEvery.
func TestTopSourceReadsWhatTheScreenShows(t *testing.T) {
	f, env := seeded(t)
	now := time.Unix(1e9, 0)
	env.Now = func() time.Time { return now }
	r := &runner{env: env}
	client, err := env.Open()
	if err != nil {
		t.Fatal(err)
	}
	src := r.topSource(client)
	web := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: mustAddr("10.0.0.1"), Port: 80}
	dns := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoUDP, Addr: mustAddr("10.0.0.2"), Port: 53}
	webRS := ipvs.Destination{Family: ipvs.AFInet, Addr: mustAddr("192.168.1.1"), Port: 80}
	dnsRS := ipvs.Destination{Family: ipvs.AFInet, Addr: mustAddr("192.168.1.4"), Port: 53}
	active := func(in top.Input, svc ipvs.Service, d ipvs.Destination) uint32 {
		for _, s := range in.Set.Services {
			if s.Service.Addr != svc.Addr || s.Service.Port != svc.Port {
				continue
			}
			for _, x := range s.Dests {
				if x.Addr == d.Addr && x.Port == d.Port {
					return x.Counters.ActiveConns
				}
			}
		}
		t.Fatalf("no %v in %v", d, svc)
		return 0
	}
	if _, err := src(top.Want{Services: map[rules.ServiceKey]bool{}}); err != nil {
		t.Fatal(err)
	}
	for _, sd := range []struct {
		s ipvs.Service
		d ipvs.Destination
	}{{web, webRS}, {dns, dnsRS}} {
		if err := f.SetDestinationCounters(sd.s, sd.d, ipvs.DestCounters{ActiveConns: 5}); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Second)
	in, err := src(top.Want{Services: map[rules.ServiceKey]bool{rules.KeyOf(&web): true}})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := active(in, web, webRS), active(in, dns, dnsRS); a != 5 || b != 0 {
		t.Errorf("shown service's server: %d active, want 5 (read now); hidden one's: %d, want 0 (kept)", a, b)
	}
	if len(in.Set.Services) != 3 {
		t.Errorf("%d services, want all 3", len(in.Set.Services))
	}
	now = now.Add(topFullEvery)
	if in, err = src(top.Want{Services: map[rules.ServiceKey]bool{}}); err != nil || active(in, dns, dnsRS) != 5 {
		t.Errorf("after %v every real server is read: %v", topFullEvery, err)
	}
	if in, err = src(top.Want{Full: true}); err != nil || active(in, dns, dnsRS) != 5 || active(in, web, webRS) != 5 {
		t.Errorf("a full read: %v", err)
	}

	// Only: the services named are read one by one, the others kept; a
	// deleted one leaves.
	if err := f.SetServiceStats(web, ipvs.Stats{CPS: 7}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetServiceStats(dns, ipvs.Stats{CPS: 9}); err != nil {
		t.Fatal(err)
	}
	fw := ipvs.Service{Family: ipvs.AFInet6, FWMark: 7}
	if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdDelService, Service: &fw}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	in, err = src(top.Want{Only: true, Services: map[rules.ServiceKey]bool{rules.KeyOf(&web): true, rules.KeyOf(&fw): true}})
	if err != nil {
		t.Fatal(err)
	}
	cps := map[string]uint64{}
	for _, s := range in.Set.Services {
		cps[rules.KeyOf(&s.Service).String()] = s.Stats.CPS
	}
	if len(cps) != 2 || cps["-t 10.0.0.1:80"] != 7 || cps["-u 10.0.0.2:53"] != 0 {
		t.Errorf("services after an Only read: %v, want -t 10.0.0.1:80 at 7 (read), -u 10.0.0.2:53 at 0 (kept), -f 7 gone", cps)
	}

	// Sorted by a rate, the services are dumped again once the kernel's
	// estimates may have moved (2 s), not before: a new service shows then.
	added := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: mustAddr("10.0.0.9"), Port: 80, Scheduler: "rr"}
	if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &added}); err != nil {
		t.Fatal(err)
	}
	none := top.Want{Services: map[rules.ServiceKey]bool{}}
	has := func(in top.Input, s ipvs.Service) bool {
		for i := range in.Set.Services {
			if rules.KeyOf(&in.Set.Services[i].Service) == rules.KeyOf(&s) {
				return true
			}
		}
		return false
	}
	now = now.Add(topFullEvery - 3*time.Second)
	if in, err = src(none); err != nil || !has(in, added) {
		t.Errorf("a dump 7 s after the last lacks the new service (%v)", err)
	}
	later := added
	later.Port = 81
	if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &later}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if in, err = src(none); err != nil || has(in, later) || !has(in, added) {
		t.Errorf("1 s after a dump the services are read again (%v)", err)
	}
}

// TestTopReadsTheRunRecordWhenItChanges: each frame shows lvsctl run's
// record as the file has it, read again only when it was rewritten.
func TestTopReadsTheRunRecordWhenItChanges(t *testing.T) {
	_, env := seeded(t)
	env.Now = time.Now
	r := &runner{env: env, errOut: io.Discard}
	client, err := env.Open()
	if err != nil {
		t.Fatal(err)
	}
	write := func(result string) {
		t.Helper()
		j, err := r.journal(true)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		st := &record.Run{PID: os.Getpid(), Servers: []record.Server{{Service: "-t 10.0.0.1:80", Destination: "192.168.1.1:80",
			Check: "tcp", Health: health.TargetState{State: health.Down, Result: result}}}}
		if err := j.SaveRun(st); err != nil {
			t.Fatal(err)
		}
	}
	src := r.topSource(client)
	result := func() string {
		t.Helper()
		in, err := src(top.Want{Services: map[rules.ServiceKey]bool{}})
		if err != nil {
			t.Fatal(err)
		}
		if !in.RunActive {
			t.Fatalf("run not active: %+v", in.Run)
		}
		return in.Run["-t 10.0.0.1:80 -r 192.168.1.1:80"].Result
	}
	write("connection refused")
	if got := result(); got != "connection refused" {
		t.Errorf("first frame: %q", got)
	}
	write("timeout after 1s")
	if got := result(); got != "timeout after 1s" {
		t.Errorf("after the record changed: %q", got)
	}
	if got := result(); got != "timeout after 1s" {
		t.Errorf("unchanged record: %q", got)
	}
}

// A negative, zero or too short --delay and a negative --iterations are
// refused before anything runs, by a message that names the flag and
// says what to give; kong would take "-1" for a flag.
func TestTopRefusesBadDelayAndIterations(t *testing.T) {
	_, env := seeded(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-d", "-1"}, "--delay: -1 is negative; give seconds or a duration of at least 0.1s"},
		{[]string{"--delay", "-500ms"}, "--delay: -500ms is negative; give seconds or a duration of at least 0.1s"},
		{[]string{"-d", "0"}, "--delay: 0 is too short; give seconds or a duration of at least 0.1s"},
		{[]string{"-d", "0.01"}, "--delay: 0.01 is too short"},
		{[]string{"-d", "soon"}, `--delay: "soon" is neither seconds nor a duration`},
		{[]string{"-d", "-b"}, "--delay: no value before -b"},
		{[]string{"-n", "-1"}, "--iterations: -1 is negative; give 0 (print until interrupted) or a number of frames"},
		{[]string{"--iterations=-3"}, "--iterations: -3 is negative"},
	} {
		r := run(t, env, "", append([]string{"top", "-b"}, c.args...)...)
		if r.code != exitUsage || r.stdout != "" || !strings.HasPrefix(r.stderr, "lvsctl: "+c.want) || strings.Contains(r.stderr, "expected") {
			t.Errorf("top -b %q: %+v, want exit %d and %q", c.args, r, exitUsage, c.want)
		}
	}
	// Values as top(1) takes them still work, -d=2 too.
	for _, args := range [][]string{{"-d", "0.1"}, {"-d=100ms"}, {"--delay", "1"}} {
		if r := run(t, env, "", append([]string{"top", "-b", "-n", "1"}, args...)...); r.code != exitOK || !strings.HasPrefix(r.stdout, "lvsctl top - ") {
			t.Errorf("top -b -n 1 %q: %+v", args, r)
		}
	}
}

// While lvsctl run's record says every check of a service failed, a batch
// frame marks the service ALL DOWN, the server kept in service as kept,
// and the one held out with its check's error whole, however long.
func TestTopShowsTheRunRecordsAllDown(t *testing.T) {
	_, env := seeded(t)
	r := &runner{env: env, errOut: io.Discard}
	j, err := r.journal(true)
	if err != nil {
		t.Fatal(err)
	}
	const reason = `Get "http://192.168.1.2:80/health/deep?probe=lvsctl-run": connect 192.168.1.2:80: connection refused`
	st := &record.Run{PID: os.Getpid(), AllDown: []string{"-t 10.0.0.1:80"}, Servers: []record.Server{
		{Service: "-t 10.0.0.1:80", Destination: "192.168.1.1:80", InService: true, Weight: 3, Check: "http",
			Health: health.TargetState{State: health.Down, Result: "connect 192.168.1.1:80: connection refused"}},
		{Service: "-t 10.0.0.1:80", Destination: "192.168.1.2:80", Weight: 1, Check: "http",
			Health: health.TargetState{State: health.Down, Result: reason}},
	}}
	if err := j.SaveRun(st); err != nil {
		t.Fatal(err)
	}
	j.Close()
	out := run(t, env, "", "top", "-b", "-n", "1")
	if out.code != exitOK {
		t.Fatalf("top: %+v", out)
	}
	frame := strings.Join(strings.Fields(out.stdout), " ")
	for _, want := range []string{"3 services (1 ALL DOWN), 5 real servers",
		"-t 10.0.0.1:80 - 2 servers ALL DOWN: 1/2 in service",
		"192.168.1.1:80 kept in service, all failed (connect 192.168.1.1:80: connection refused)",
		"192.168.1.2:80 held out by check (" + reason + ")",
		"-u 10.0.0.2:53 - 2 servers 2/2 in service"} {
		if !strings.Contains(frame, want) {
			t.Errorf("frame lacks %q:\n%s", want, out.stdout)
		}
	}
	js := run(t, env, "", "top", "--json", "-n", "1")
	if !strings.Contains(js.stdout, `"all_down":["-t 10.0.0.1:80"]`) || !strings.Contains(js.stdout, `"state":"ALL DOWN: 1/2 in service","all_down":true`) {
		t.Errorf("JSON frame:\n%s", js.stdout)
	}
}
