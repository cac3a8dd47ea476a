package ipvsadm

import (
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"golang.org/x/sys/unix"
)

// lazyKernel is the fake kernel behind a connection that answers late:
// its pipeline applies a request only when the answer is delivered, and
// delivers answers only when the window is full, at random moments in
// between, or on Flush. Any read while requests are unanswered is a
// mistake of the engine (the real Conn forbids it), so it fails the test.
type lazyKernel struct {
	*ipvstest.Fake
	t       testing.TB
	rng     *rand.Rand
	pending []pendingReq
	// failAfter, when positive, breaks the transport after that many
	// submissions: every unanswered request gets the transport error.
	failAfter int
	submitted int
	broken    error
}

type pendingReq struct {
	req  ipvs.Request
	done func(error)
}

func (k *lazyKernel) Close() error { return nil }

// detach copies what req points to: a pipeline must not keep the caller's
// values, which the caller reuses for its next request. The copies are
// poisoned first, so a caller that changed them before this point shows up
// as a wrong table, not as luck.
func detach(req ipvs.Request) ipvs.Request {
	if req.Service != nil {
		s := *req.Service
		*req.Service = ipvs.Service{Scheduler: "poisoned"}
		req.Service = &s
	}
	if req.Dest != nil {
		d := *req.Dest
		*req.Dest = ipvs.Destination{Weight: 12345}
		req.Dest = &d
	}
	if req.Daemon != nil {
		d := *req.Daemon
		req.Daemon = &d
	}
	if req.Timeouts != nil {
		t := *req.Timeouts
		req.Timeouts = &t
	}
	return req
}

func (k *lazyKernel) mustBeIdle(op string) {
	if len(k.pending) > 0 {
		k.t.Errorf("%s called with %d unanswered requests", op, len(k.pending))
	}
}

func (k *lazyKernel) Services() ([]ipvs.ServiceEntry, error) {
	k.mustBeIdle("Services")
	return k.Fake.Services()
}

func (k *lazyKernel) Service(key ipvs.Service) (ipvs.ServiceEntry, error) {
	k.mustBeIdle("Service")
	return k.Fake.Service(key)
}

func (k *lazyKernel) Destinations(svc ipvs.Service) ([]ipvs.DestinationEntry, error) {
	k.mustBeIdle("Destinations")
	return k.Fake.Destinations(svc)
}

func (k *lazyKernel) Timeouts() (ipvs.Timeouts, error) {
	k.mustBeIdle("Timeouts")
	return k.Fake.Timeouts()
}

func (k *lazyKernel) Daemons() ([]ipvs.Daemon, error) {
	k.mustBeIdle("Daemons")
	return k.Fake.Daemons()
}

func (k *lazyKernel) Exec(req ipvs.Request) error {
	k.mustBeIdle("Exec")
	if k.broken != nil {
		return &ipvs.OpError{Op: req.Cmd, Err: k.broken}
	}
	return k.Fake.Exec(req)
}

func (k *lazyKernel) Pipeline(window int) ipvs.Pipeline {
	if window < 1 {
		k.t.Fatalf("Pipeline(%d)", window)
	}
	return &lazyPipeline{k: k, window: window}
}

type lazyPipeline struct {
	k      *lazyKernel
	window int
}

// deliver answers the oldest n requests.
func (p *lazyPipeline) deliver(n int) {
	k := p.k
	for ; n > 0 && len(k.pending) > 0; n-- {
		r := k.pending[0]
		k.pending = k.pending[1:]
		r.done(k.Fake.Exec(r.req))
	}
}

func (p *lazyPipeline) fail() error {
	k := p.k
	k.broken = unix.ENOBUFS
	for len(k.pending) > 0 {
		r := k.pending[0]
		k.pending = k.pending[1:]
		r.done(&ipvs.OpError{Op: r.req.Cmd, Err: k.broken})
	}
	return &ipvs.OpError{Op: ipvs.CmdFlush, Err: k.broken}
}

func (p *lazyPipeline) Submit(req ipvs.Request, done func(error)) error {
	k := p.k
	if k.broken != nil {
		return &ipvs.OpError{Op: req.Cmd, Err: k.broken}
	}
	k.submitted++
	if k.failAfter > 0 && k.submitted > k.failAfter {
		return p.fail()
	}
	for len(k.pending) >= p.window {
		p.deliver(1 + k.rng.IntN(len(k.pending)))
	}
	k.pending = append(k.pending, pendingReq{detach(req), done})
	if k.rng.IntN(4) == 0 {
		p.deliver(k.rng.IntN(len(k.pending) + 1))
	}
	return nil
}

func (p *lazyPipeline) Flush() error {
	if p.k.broken != nil {
		return &ipvs.OpError{Op: ipvs.CmdFlush, Err: p.k.broken}
	}
	p.deliver(len(p.k.pending))
	return nil
}

// event is one write to stdout or stderr, so that the order of the two
// streams is compared too.
type event struct {
	stderr bool
	text   string
}

type recorder struct {
	events *[]event
	stderr bool
}

func (r recorder) Write(b []byte) (int, error) {
	*r.events = append(*r.events, event{r.stderr, string(b)})
	return len(b), nil
}

// restoreRun is one ipvsadm -R over a fresh fake kernel.
type restoreRun struct {
	events []event
	status int
	table  tableState
}

// tableState is everything a restore can change.
type tableState struct {
	Services []ipvs.ServiceEntry
	Dests    [][]ipvs.DestinationEntry
	Timeouts ipvs.Timeouts
	Daemons  []ipvs.Daemon
}

func stateOf(t testing.TB, f *ipvstest.Fake) tableState {
	t.Helper()
	var s tableState
	var err error
	if s.Services, err = f.Services(); err != nil {
		t.Fatal(err)
	}
	for _, svc := range s.Services {
		d, err := f.Destinations(svc.Service)
		if err != nil {
			t.Fatal(err)
		}
		s.Dests = append(s.Dests, d)
	}
	if s.Timeouts, err = f.Timeouts(); err != nil {
		t.Fatal(err)
	}
	if s.Daemons, err = f.Daemons(); err != nil {
		t.Fatal(err)
	}
	return s
}

// restoreWith runs "ipvsadm -R" with input on a fresh fake, with the given
// engine (nil: the sequential one) behind a connection that answers late.
func restoreWith(t testing.TB, engine RestoreEngine, input string, seed uint64, failAfter int) restoreRun {
	t.Helper()
	f := ipvstest.New(ipvstest.WithInterfaces("lo", "eth0"))
	k := &lazyKernel{Fake: f, t: t, rng: rand.New(rand.NewPCG(seed, 7)), failAfter: failAfter}
	var r restoreRun
	env := Env{
		Open:          func() (ipvs.Client, error) { return k, nil },
		Resolver:      testResolver(t),
		ConnFile:      "testdata/no-ip_vs_conn", // -c is not generated
		RestoreEngine: engine,
	}
	r.status = Main([]string{"ipvsadm", "-R"}, strings.NewReader(input),
		recorder{&r.events, false}, recorder{&r.events, true}, env)
	if len(k.pending) > 0 {
		t.Errorf("%d requests still unanswered after the restore", len(k.pending))
	}
	r.table = stateOf(t, f)
	return r
}

func compareRuns(t *testing.T, input string, want, got restoreRun) {
	t.Helper()
	if got.status != want.status || !reflect.DeepEqual(got.events, want.events) {
		t.Errorf("input:\n%s\nsequential: status %d, output %+v\npipelined:  status %d, output %+v",
			input, want.status, want.events, got.status, got.events)
	}
	if !reflect.DeepEqual(got.table, want.table) {
		t.Errorf("input:\n%s\ntables differ:\nsequential %+v\npipelined  %+v", input, want.table, got.table)
	}
}

// TestPipelinedMatchesSequential runs many generated inputs through both
// engines and requires the same output (both streams, in the same order),
// the same status and the same final tables.
func TestPipelinedMatchesSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 5000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		input := genInput(rng)
		seed := rng.Uint64()
		window := []int{1, 2, 3, 8, 256}[rng.IntN(5)]
		want := restoreWith(t, nil, input, seed, 0)
		got := restoreWith(t, Pipelined(window), input, seed, 0)
		compareRuns(t, input, want, got)
		if t.Failed() {
			t.Fatalf("case %d (window %d) failed", i, window)
		}
	}
}

// TestPipelinedFixedInputs covers the fixed restore cases, each checked
// against the sequential engine and against ipvsadm's known output.
func TestPipelinedFixedInputs(t *testing.T) {
	tests := []struct {
		name, input string
		status      int
		stderr      string
	}{
		{"empty", "", 0, ""},
		{"only blank lines", "\n  \n\t\r\n", 0, ""},
		{"good", "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 192.168.0.1:80 -m\n", 0, ""},
		{"kernel error in the middle goes on",
			"-A -t 10.0.0.1:80\n-A -t 10.0.0.1:80\n-A -t 10.0.0.2:80\n", 0,
			"Service already exists\n"},
		{"kernel error last decides the status",
			"-A -t 10.0.0.1:80\n-A -t 10.0.0.2:80\n-A -t 10.0.0.1:80\n", 255,
			"Service already exists\n"},
		{"popt error goes on",
			"-A -t 10.0.0.1:80\n-L --bogus\n-A -t 10.0.0.2:80\n", 0,
			"--bogus: unknown option\n"},
		{"validation error stops",
			"-A -t 10.0.0.1:80\n-A -t 10.0.0.1:80\n-A -t 10.0.0.3\n-A -t 10.0.0.4:80\n", 2,
			"Service already exists\nZero port specified for non-persistent service\n"},
		{"comment line stops with try-help",
			"-A -t 10.0.0.1:80\n-A -t 10.0.0.1:80\n# comment\n-A -t 10.0.0.4:80\n", 255,
			"Service already exists\nTry `ipvsadm -h' or 'ipvsadm --help' for more information.\n"},
		{"nested restore stops",
			"-A -t 10.0.0.1:80\n-R\n-A -t 10.0.0.4:80\n", 255,
			"Try `ipvsadm -h' or 'ipvsadm --help' for more information.\n"},
		{"CRLF", "-A -t 10.0.0.1:80\r\n-a -t 10.0.0.1:80 -r 10.1.1.1\r\n", 0, ""},
		{"trailing whitespace at EOF drops the line", "-A -t 10.0.0.1:80\n-A -t 10.0.0.1:80  ", 0, ""},
		{"no newline at EOF", "-A -t 10.0.0.1:80\n-A -t 10.0.0.1:80", 255, "Service already exists\n"},
		{"many kernel errors keep their order",
			"-a -t 1.1.1.1:80 -r 2.2.2.2\n-d -t 1.1.1.1:80 -r 2.2.2.2\n-A -t 1.1.1.1:80 -s nosuch\n-E -t 1.1.1.1:80\n", 255,
			"Service not defined\nService not defined\nScheduler or persistence engine not found\nNo such service\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := restoreWith(t, nil, tc.input, 1, 0)
			for _, window := range []int{1, 2, DefaultWindow} {
				got := restoreWith(t, Pipelined(window), tc.input, 1, 0)
				compareRuns(t, tc.input, want, got)
				stderr := ""
				for _, e := range got.events {
					if e.stderr {
						stderr += e.text
					}
				}
				if got.status != tc.status || stderr != tc.stderr {
					t.Errorf("window %d: status %d, stderr %q; want %d, %q", window, got.status, stderr, tc.status, tc.stderr)
				}
			}
		})
	}
}

// TestPipelinedTransportFailure: when the connection breaks, every line
// that was waiting and every later change reports the failure, the
// restore goes on like the sequential engine after a failed Exec, and
// nothing is left unanswered.
func TestPipelinedTransportFailure(t *testing.T) {
	var input strings.Builder
	for i := range 20 {
		fmt.Fprintf(&input, "-A -t 10.0.0.%d:80\n", i+1)
	}
	got := restoreWith(t, Pipelined(4), input.String(), 3, 10)
	if got.status != 255 {
		t.Errorf("status %d, want 255", got.status)
	}
	var stderr strings.Builder
	for _, e := range got.events {
		if e.stderr {
			stderr.WriteString(e.text)
		}
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	// Requests 1..10 went through (some may still have been unanswered when
	// the 11th broke the connection); the 11th to the 20th all fail.
	if len(lines) < 10 || len(lines) > 20 {
		t.Fatalf("%d error lines, want 10..20:\n%s", len(lines), stderr.String())
	}
	for _, l := range lines {
		if l != "No buffer space available" {
			t.Errorf("unexpected message %q", l)
		}
	}
	if n := len(got.table.Services); n+len(lines) != 20 {
		t.Errorf("%d services created and %d failures; want 20 in all", n, len(lines))
	}
}

// genInput makes a restore input from a small vocabulary of lines, so that
// services collide (kernel errors), some lines fail to parse in each way
// ipvsadm knows, and white space varies.
func genInput(rng *rand.Rand) string {
	n := rng.IntN(30)
	var b strings.Builder
	for i := range n {
		line := genLine(rng, i == n-1)
		if rng.IntN(6) == 0 && i < n-1 {
			// Runs of lines alike but for their addresses, which the
			// pipelined engine reads with LineTemplates.
			if rng.IntN(2) == 0 {
				line = genRun(rng)
			} else {
				line = genServiceRuns(rng)
			}
		}
		b.WriteString(line)
		if i < n-1 || rng.IntN(3) > 0 {
			b.WriteString([]string{"\n", "\n", "\n", "\r\n", " \n", "\t\n"}[rng.IntN(6)])
		} else {
			// The last line without a newline, possibly with white space
			// after it (which makes ipvsadm drop it).
			b.WriteString([]string{"", "", " ", "  ", "\t\t"}[rng.IntN(5)])
		}
	}
	return b.String()
}

var (
	genVIPs  = []string{"10.0.0.1:80", "10.0.0.2:80", "[2001:db8::1]:80", "vip1.example.com:http", "10.0.0.1:0"}
	genRIPs  = []string{"192.168.0.1", "192.168.0.2:8080", "[2001:db8::10]:80", "rs1.example.com"}
	genMarks = []string{"1", "2", "4294967295"}
)

func pick(rng *rand.Rand, s []string) string { return s[rng.IntN(len(s))] }

// genRunRIPs are the real servers of genRun's lines after the first: most
// with a port, and near misses of each kind.
var genRunRIPs = []string{"192.168.0.3:80", "192.168.0.4:8080", "192.168.0.5:0", "10.1.2.3:80", "192.168.0.3:80",
	"[2001:db8::11]:80", "[2001:db8::12]:443", "192.168.0.6", "192.168.0.256:80", "192.168.0.7:65536",
	"192.168.0.8:80\x00x", "192.168.0.9:80 -w 2", "rs1.example.com:80", "192.168.0.10:http", "[::ffff:1.2.3.4]:80"}

// genRun writes a destination line and a few more that differ from it
// only in the real server (the last one without its newline).
func genRun(rng *rand.Rand) string {
	svc := "-t " + pick(rng, []string{"10.0.0.1:80", "10.0.0.2:80", "[2001:db8::1]:80"})
	if rng.IntN(5) == 0 {
		svc = "-f " + pick(rng, genMarks)
	}
	head := "-a " + svc + " -r "
	tail := " " + pick(rng, []string{"-m", "-g", "-i"})
	if rng.IntN(2) == 0 {
		tail += " -w " + pick(rng, []string{"0", "1", "5"})
	}
	lines := []string{head + pick(rng, []string{"192.168.0.1:80", "192.168.0.2:8080", "[2001:db8::10]:80"}) + tail}
	for range 1 + rng.IntN(6) {
		lines = append(lines, head+pick(rng, genRunRIPs)+tail)
	}
	return strings.Join(lines, "\n")
}

// genRunMarks are the fwmarks of genServiceRuns: most valid, some that
// ParseFast and the templates refuse.
var genRunMarks = []string{"1", "2", "3", "77", "4294967295", "0", "07", "4294967296", "12x"}

// genRunVIPs are the service addresses of genServiceRuns: most like the
// first service's, and near misses of each kind.
var genRunVIPs = []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:8080", "10.0.0.4:0", "10.0.0.5", "[2001:db8::1]:80",
	"[2001:db8::2]:80", "10.0.0.256:80", "10.0.0.6:80x", "vip1.example.com:http", "10.0.0.1:80"}

// genServiceRuns writes a few services as ipvsadm -S does, each line
// followed by its destination lines: the lines of each kind differ only
// in their addresses (the last line without its newline).
func genServiceRuns(rng *rand.Rand) string {
	proto := pick(rng, []string{"-t", "-u", "-f"})
	opts := pick(rng, []string{" -s wlc", " -s rr -p 60", " -s mh -p", ""})
	method := " " + pick(rng, []string{"-m", "-g", "-i"}) + " -w " + pick(rng, []string{"0", "1"})
	var lines []string
	for range 1 + rng.IntN(4) {
		vip := pick(rng, genRunVIPs)
		if proto == "-f" {
			vip = pick(rng, genRunMarks)
		}
		lines = append(lines, "-A "+proto+" "+vip+opts)
		for range rng.IntN(4) {
			lines = append(lines, "-a "+proto+" "+vip+" -r "+pick(rng, genRunRIPs)+method)
		}
	}
	return strings.Join(lines, "\n")
}

func genService(rng *rand.Rand) string {
	switch rng.IntN(5) {
	case 0:
		return "-f " + pick(rng, genMarks)
	case 1:
		return "-u " + pick(rng, genVIPs)
	default:
		return "-t " + pick(rng, genVIPs)
	}
}

func genLine(rng *rand.Rand, last bool) string {
	svc := genService(rng)
	words := []string{}
	switch r := rng.IntN(100); {
	case r < 20:
		words = append(words, "-A", svc)
		if rng.IntN(2) == 0 {
			words = append(words, "-s", pick(rng, []string{"rr", "wrr", "sh", "mh", "nosuchsched"}))
		}
		if rng.IntN(3) == 0 {
			words = append(words, "-p", pick(rng, []string{"60", "360"}))
		}
	case r < 45:
		words = append(words, "-a", svc, "-r", pick(rng, genRIPs), pick(rng, []string{"-m", "-g", "-i"}))
		if rng.IntN(2) == 0 {
			words = append(words, "-w", pick(rng, []string{"0", "1", "5"}))
		}
		if rng.IntN(6) == 0 {
			words = append(words, "-x", "10", "-y", "20") // l > u: ERANGE
		}
	case r < 50:
		words = append(words, "-e", svc, "-r", pick(rng, genRIPs), "-w", "3")
	case r < 55:
		words = append(words, "-d", svc, "-r", pick(rng, genRIPs))
	case r < 60:
		words = append(words, "-E", svc, "-s", "wlc")
	case r < 64:
		words = append(words, "-D", svc)
	case r < 66:
		words = append(words, "-C")
	case r < 68:
		words = append(words, "-Z", svc)
	case r < 70:
		words = append(words, "--set", "10", "20", "30")
	case r < 72:
		words = append(words, "--start-daemon", pick(rng, []string{"master", "backup"}), "--mcast-interface", pick(rng, []string{"lo", "eth0", "nosuchif"}))
	case r < 73:
		words = append(words, "--stop-daemon", pick(rng, []string{"master", "backup"}))
	case r < 76:
		words = append(words, "-L", "-n")
	case r < 78:
		words = append(words, "-S", "-n")
	case r < 79:
		words = append(words, "-L", "--timeout")
	case r < 82:
		words = append(words, "-L", "--bogus") // popt error: goes on
	case r < 84:
		words = append(words, "-a", svc, "-w") // missing argument: goes on
	case r < 88:
		words = append(words, "ipvsadm") // dropped token: an empty line
	case r < 90:
		// blank line
	default:
		// Lines that end the restore: rare except at the end.
		if !last && rng.IntN(4) > 0 {
			words = append(words, "-A", svc)
			break
		}
		words = append(words, pick(rng, []string{
			"-A -t 10.0.0.9",        // validation error
			"# comment",             // try-help
			"-R",                    // nested restore
			"-v",                    // version
			"-A -t 1.2.3.4:80 -b ,", // crash
			"-a -t 10.0.0.1:80 -r 1.1.1.1 -x abc",
		}))
	}
	sep := pick(rng, []string{" ", " ", "  ", "\t", " ipvsadm "})
	lead := pick(rng, []string{"", "", " ", "ipvsadm "})
	return lead + strings.Join(words, sep)
}

var _ io.Writer = recorder{}

// lazyEnv is the environment of an ipvsadm process on the fake kernel f,
// whose connection answers late.
func lazyEnv(t testing.TB, f *ipvstest.Fake) Env {
	return Env{
		Open: func() (ipvs.Client, error) {
			return &lazyKernel{Fake: f, t: t, rng: rand.New(rand.NewPCG(5, 5))}, nil
		},
		Resolver:      testResolver(t),
		RestoreEngine: Pipelined(DefaultWindow),
	}
}
