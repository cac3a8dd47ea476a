package wrappers

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/ipvsadm"
	"golang.org/x/sys/unix"
)

// tableWith returns a fake kernel holding one service, 10.9.9.9:1.
func tableWith(t *testing.T) *ipvstest.Fake {
	t.Helper()
	f := ipvstest.New()
	if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &ipvs.Service{
		Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: mustAddr("10.9.9.9"), Port: 1,
		Scheduler: "wlc", Netmask: 0xffffffff}}); err != nil {
		t.Fatal(err)
	}
	return f
}

func saved(t *testing.T, f *ipvstest.Fake) string {
	t.Helper()
	var out strings.Builder
	if st := SaveMain([]string{"ipvsadm-save", "-n"}, nil, &out, io.Discard, fakeEnv(t, f)); st != 0 {
		t.Fatalf("save status %d", st)
	}
	return out.String()
}

func envOf(vars ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(vars); i += 2 {
			if vars[i] == k {
				return vars[i+1]
			}
		}
		return ""
	}
}

type failingReader struct{ data io.Reader }

func (r failingReader) Read(b []byte) (int, error) {
	n, err := r.data.Read(b)
	if err == io.EOF {
		return n, &os.PathError{Op: "read", Path: "/dev/stdin", Err: syscall.EIO}
	}
	return n, err
}

// TestRestoreScriptRefusals: inputs on which Debian's script flushes the
// table and restores less than the input leave the table alone here.
func TestRestoreScriptRefusals(t *testing.T) {
	tests := []struct {
		name   string
		stdin  io.Reader
		getenv func(string) string
		stderr string
	}{
		{"read error", failingReader{strings.NewReader("-A -t 10.0.0.2:80\n")}, envOf(),
			"ipvsadm-restore: reading standard input: Input/output error; the IPVS table was not changed\n"},
		{"invalid UTF-8 in a UTF-8 locale", strings.NewReader("-A -t 10.0.0.2:80\n-A -t 10.0.0.3:80 \xff\n"), envOf("LANG", "C.UTF-8"),
			"ipvsadm-restore: line 2: is not valid UTF-8 (the locale's character set), so grep would drop it\n" + refused},
		{"a line over 1 MiB", strings.NewReader("-A -t 10.0.0.2:80\n-A -t 10.0.0.3:80 " + strings.Repeat("x", 1<<20) + "\n"), envOf(),
			"ipvsadm-restore: line 2: is longer than 1 MiB: this is not a rules file\n" + refused},
		{"NUL in the first line", strings.NewReader("\x00"), envOf(),
			"ipvsadm-restore: line 1: holds a NUL byte (column 1): this is not a rules file\n" + refused},
		{"many bad lines", strings.NewReader(strings.Repeat("x\n", 15)), envOf(),
			strings.Repeat("", 0) + func() string {
				var b strings.Builder
				for i := 1; i <= 10; i++ {
					fmt.Fprintf(&b, "ipvsadm-restore: line %d: does not parse: it does not start with an ipvsadm command option\n", i)
				}
				return b.String() + "ipvsadm-restore: and 5 more lines like these\n" + refused
			}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tableWith(t)
			var out, errb strings.Builder
			st := restoreScript([]string{"ipvsadm-restore"}, tc.stdin, &out, &errb, fakeEnv(t, f), tc.getenv)
			if st != 1 || out.String() != "" || errb.String() != tc.stderr {
				t.Errorf("status %d, stdout %q, stderr\n%s\nwant 1, \"\",\n%s", st, out.String(), errb.String(), tc.stderr)
			}
			if got := saved(t, f); got != untouched {
				t.Errorf("table afterwards %q, want it untouched", got)
			}
		})
	}
	// Invalid UTF-8 outside a UTF-8 locale is text to grep: restored.
	f := tableWith(t)
	var errb strings.Builder
	if st := restoreScript([]string{"ipvsadm-restore"}, strings.NewReader("# \xff\n-A -t 10.0.0.2:80\n"), io.Discard, &errb, fakeEnv(t, f), envOf("LANG", "C")); st != 0 || errb.Len() > 0 {
		t.Errorf("C locale: status %d, stderr %q", st, errb.String())
	}
}

func TestRestoreScriptCheckOnly(t *testing.T) {
	for input, want := range map[string]int{"-A -t 10.0.0.2:80\n": 0, "-A -t 10.0.0.2\n-A\n": 1} {
		f := tableWith(t)
		st := restoreScript([]string{"ipvsadm-restore"}, strings.NewReader(input), io.Discard, io.Discard, fakeEnv(t, f), envOf("LVSKIT_RESTORE_CHECK", "1"))
		if st != want {
			t.Errorf("%q: status %d, want %d", input, st, want)
		}
		if got := saved(t, f); got != untouched {
			t.Errorf("%q: the check changed the table: %q", input, got)
		}
	}
}

// trial is what a refused trial restore prints after ipvsadm's messages.
const trial = " in a trial restore into an empty scratch network namespace\n" + refused

// TestRestoreScriptKernelRefusals: a line the kernel refuses in the trial
// restore (a duplicate service, an unknown scheduler) leaves the table
// untouched and fails, naming the input lines after ipvsadm's own
// messages; LVSKIT_RESTORE_STRICT=1 changes nothing. With
// LVSKIT_RESTORE_PROOF=off the table is flushed and restored as Debian's
// script does, and the same lines still fail the run.
func TestRestoreScriptKernelRefusals(t *testing.T) {
	input := "# header\n-A -t 10.0.0.2:80\n\n-A -t 10.0.0.2:80\n# c\n-A -t 10.0.0.3:80 -s nosuch\n-A -t 10.0.0.4:80\n"
	messages := "Service already exists\nScheduler or persistence engine not found\n"
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		stderr string
		table  string
	}{
		{"default", envOf(), messages + "ipvsadm-restore: 2 lines failed (input lines 4, 6)" + trial, untouched},
		{"strict", envOf("LVSKIT_RESTORE_STRICT", "1"), messages + "ipvsadm-restore: 2 lines failed (input lines 4, 6)" + trial, untouched},
		{"proof off", envOf("LVSKIT_RESTORE_PROOF", "off"),
			messages + "ipvsadm-restore: 2 lines failed (input lines 4, 6); the table does not hold what they ask for\n",
			"-A -t 10.0.0.2:80 -s wlc\n-A -t 10.0.0.4:80 -s wlc\n"},
	} {
		f := tableWith(t)
		var out, errb strings.Builder
		st := restoreScript([]string{"ipvsadm-restore"}, strings.NewReader(input), &out, &errb, fakeEnv(t, f), tc.getenv)
		if st != 1 || out.Len() > 0 || errb.String() != tc.stderr {
			t.Errorf("%s: status %d, stdout %q, stderr\n%s\nwant 1, \"\",\n%s", tc.name, st, out.String(), errb.String(), tc.stderr)
		}
		if got := saved(t, f); got != tc.table {
			t.Errorf("%s: table afterwards %q, want %q", tc.name, got, tc.table)
		}
	}

	// One refused line after many good ones, the last line.
	var many strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&many, "-A -t 10.1.%d.%d:80 -s rr\n", i/250, i%250+1)
	}
	many.WriteString("-A -t 10.2.0.1:80 -s wrrr\n")
	f := tableWith(t)
	var errb strings.Builder
	st := restoreScript([]string{"ipvsadm-restore"}, strings.NewReader(many.String()), io.Discard, &errb, fakeEnv(t, f), envOf())
	if want := "Scheduler or persistence engine not found\nipvsadm-restore: 1 line failed (input line 1001)" + trial; st != 1 || errb.String() != want {
		t.Errorf("refused last line: status %d, stderr %q; want 1, %q", st, errb.String(), want)
	}
	if got := saved(t, f); got != untouched {
		t.Errorf("refused last line: table afterwards %q, want it untouched", got)
	}
}

// TestRestoreScriptEarlyEnd: a line that ends the restore before the last
// line (-v) is refused by the trial, and fails the run without it; -h or
// -v as the last line is no failure.
func TestRestoreScriptEarlyEnd(t *testing.T) {
	input := "-A -t 10.0.0.2:80\n-v\n-A -t 10.0.0.3:80\n"
	f := tableWith(t)
	var out, errb strings.Builder
	st := restoreScript([]string{"ipvsadm-restore"}, strings.NewReader(input), &out, &errb, fakeEnv(t, f), envOf())
	want := "ipvsadm-restore: a trial restore into an empty scratch network namespace ended at input line 2; later lines would not be restored\n" + refused
	if st != 1 || out.Len() > 0 || errb.String() != want || saved(t, f) != untouched {
		t.Errorf("trial: status %d, stdout %q, stderr %q, table %q; want 1, nothing, %q, untouched", st, out.String(), errb.String(), saved(t, f), want)
	}
	out.Reset()
	errb.Reset()
	st = restoreScript([]string{"ipvsadm-restore"}, strings.NewReader(input), &out, &errb, fakeEnv(t, f), envOf("LVSKIT_RESTORE_PROOF", "off"))
	want = "ipvsadm-restore: the restore ended at input line 2; later lines were not restored\n"
	if st != 1 || !strings.HasPrefix(out.String(), "ipvsadm v1.31") || errb.String() != want || saved(t, f) != "-A -t 10.0.0.2:80 -s wlc\n" {
		t.Errorf("proof off: status %d, stdout %q, stderr %q, table %q; want 1, the version, %q, line 1", st, out.String(), errb.String(), saved(t, f), want)
	}
	out.Reset()
	errb.Reset()
	st = restoreScript([]string{"ipvsadm-restore"}, strings.NewReader("-A -t 10.0.0.2:80\n-v\n"), &out, &errb, fakeEnv(t, f), envOf())
	if st != 0 || !strings.HasPrefix(out.String(), "ipvsadm v1.31") || errb.Len() > 0 || saved(t, f) != "-A -t 10.0.0.2:80 -s wlc\n" {
		t.Errorf("-v last: status %d, stdout %q, stderr %q, table %q; want 0, the version once, nothing, line 1", st, out.String(), errb.String(), saved(t, f))
	}
}

// noDaemons is a scratch kernel that fails every sync daemon request, as
// a scratch namespace without the host's interfaces and daemons would.
type noDaemons struct{ *fakeKernel }

func (k noDaemons) Exec(req ipvs.Request) error {
	if req.Cmd == ipvs.CmdNewDaemon || req.Cmd == ipvs.CmdDelDaemon {
		return &ipvs.OpError{Op: req.Cmd, Err: unix.ENODEV}
	}
	return k.fakeKernel.Exec(req)
}

// TestRestoreScriptTrial: sync daemon lines are left out of the trial;
// the scratch table is emptied when the trial ends; the real table is
// flushed and restored only after it.
func TestRestoreScriptTrial(t *testing.T) {
	var scratches []*ipvstest.Fake
	run := restoreRun{Args: []string{"ipvsadm-restore"}, Stdout: io.Discard, RestoreEnv: RestoreEnv{Getenv: envOf(),
		Scratch: func() (ipvs.Client, error) {
			f := ipvstest.New()
			scratches = append(scratches, f)
			return noDaemons{&fakeKernel{f}}, nil
		}}}
	f := tableWith(t)
	var errb strings.Builder
	run.Stdin = strings.NewReader("-A -t 10.0.0.2:80\n--start-daemon master --mcast-interface lo\n-a -t 10.0.0.2:80 -r 10.1.1.1:80 -m\n")
	run.Stderr, run.Env = &errb, fakeEnv(t, f)
	if st := run.run(); st != 0 || errb.Len() > 0 {
		t.Errorf("status %d, stderr %q; want 0 and nothing", st, errb.String())
	}
	if got, want := saved(t, f), "-A -t 10.0.0.2:80 -s wlc\n-a -t 10.0.0.2:80 -r 10.1.1.1:80 -m -w 1\n"; got != want {
		t.Errorf("table %q, want %q", got, want)
	}
	if d, _ := f.Daemons(); len(d) != 1 {
		t.Errorf("daemons in the real table: %+v, want the master", d)
	}
	if len(scratches) != 1 {
		t.Fatalf("%d scratch tables opened, want 1", len(scratches))
	}
	if svcs, _ := scratches[0].Services(); len(svcs) != 0 {
		t.Errorf("the scratch table holds %d services after the trial, want it emptied", len(svcs))
	}
}

// TestRestoreScriptWithoutScratch: when no scratch table can be had (no
// CAP_SYS_ADMIN), the restore is refused while the real table could be
// changed, and LVSKIT_RESTORE_PROOF=off restores it; when the real table
// cannot be opened either (not root), the run is Debian's. A scratch
// table that IPVS does not answer in is retried once the module loader
// ran.
func TestRestoreScriptWithoutScratch(t *testing.T) {
	noNamespace := func() (ipvs.Client, error) {
		return nil, fmt.Errorf("scratch network namespace: unshare(CLONE_NEWNET): %w", unix.EPERM)
	}
	f := tableWith(t)
	var errb strings.Builder
	run := restoreRun{Args: []string{"ipvsadm-restore"}, Stdin: strings.NewReader("-A -t 10.0.0.2:80\n"), Stdout: io.Discard, Stderr: &errb,
		RestoreEnv: RestoreEnv{Env: fakeEnv(t, f), Scratch: noNamespace, Getenv: envOf()}}
	want := "ipvsadm-restore: cannot try the input first: scratch network namespace: unshare(CLONE_NEWNET): operation not permitted\n" +
		"ipvsadm-restore: the IPVS table was not changed (LVSKIT_RESTORE_PROOF=off restores without the trial)\n"
	if st := run.run(); st != 1 || errb.String() != want || saved(t, f) != untouched {
		t.Errorf("no namespace: status %d, stderr %q, table %q; want 1, %q, untouched", st, errb.String(), saved(t, f), want)
	}
	errb.Reset()
	run.Stdin, run.Getenv = strings.NewReader("-A -t 10.0.0.2:80\n"), envOf("LVSKIT_RESTORE_PROOF", "off")
	if st := run.run(); st != 0 || errb.Len() > 0 || saved(t, f) != "-A -t 10.0.0.2:80 -s wlc\n" {
		t.Errorf("proof off: status %d, stderr %q, table %q", st, errb.String(), saved(t, f))
	}

	// Not root: both ipvsadm runs fail to start, as under Debian's script.
	errb.Reset()
	run.Stdin, run.Getenv = strings.NewReader("-A -t 10.0.0.2:80\n"), envOf()
	run.Env = ipvsadm.Env{Open: func() (ipvs.Client, error) { return nil, &ipvs.OpError{Op: ipvs.CmdGetInfo, Err: unix.EPERM} }}
	initError := "Can't initialize ipvs: Permission denied (you must be root)\nAre you sure that IP Virtual Server is built in the kernel or as module?\n"
	if st := run.run(); st != 2 || errb.String() != initError+initError {
		t.Errorf("not root: status %d, stderr %q; want 2 and ipvsadm's message twice", st, errb.String())
	}

	// No IPVS answering until the module loader ran.
	f = tableWith(t)
	errb.Reset()
	loaded, tries := false, 0
	run.Stdin, run.Env = strings.NewReader("-A -t 10.0.0.2:80 -s nosuch\n"), fakeEnv(t, f)
	run.Env.Modprobe = func() error { loaded = true; return nil }
	run.Scratch = func() (ipvs.Client, error) {
		tries++
		if !loaded {
			return nil, &ipvs.OpError{Op: ipvs.CmdGetInfo, Err: unix.ENOPROTOOPT}
		}
		return scratch()
	}
	if st := run.run(); st != 1 || tries != 2 || !strings.HasSuffix(errb.String(), trial) || saved(t, f) != untouched {
		t.Errorf("module loaded for the trial: status %d after %d tries, stderr %q, table %q; want a refusal after 2", st, tries, errb.String(), saved(t, f))
	}
}

// interruptingKernel sends a signal on the wrapper's interrupt channel
// when the n-th change is submitted.
type interruptingKernel struct {
	*fakeKernel
	n   int
	sig chan os.Signal
}

func (k *interruptingKernel) Pipeline(window int) ipvs.Pipeline {
	return &interruptingPipeline{k.fakeKernel.Pipeline(window), k}
}

type interruptingPipeline struct {
	ipvs.Pipeline
	k *interruptingKernel
}

func (p *interruptingPipeline) Submit(req ipvs.Request, done func(error)) error {
	p.k.n--
	if p.k.n == 0 {
		p.k.sig <- syscall.SIGTERM
	}
	return p.Pipeline.Submit(req, done)
}

// TestRestoreScriptInterrupted: SIGTERM in the middle of the restore ends
// it after the lines already sent are answered; the report names the last
// input line restored and the table holds exactly the lines before it. A
// signal before the flush, or during the trial, changes nothing.
func TestRestoreScriptInterrupted(t *testing.T) {
	var input strings.Builder
	input.WriteString("# rules\n")
	const services = 2000
	for i := range services {
		fmt.Fprintf(&input, "-A -t 10.1.%d.%d:80 -s rr\n", i/250, i%250+1)
	}
	f := tableWith(t)
	// Sent from inside the 700th Submit; the restore polls it before the
	// next line, so it stops after exactly 700 lines.
	sig := make(chan os.Signal, 1)
	env := fakeEnv(t, f)
	open := env.Open
	env.Open = func() (ipvs.Client, error) {
		c, err := open()
		if err != nil {
			return nil, err
		}
		return &interruptingKernel{fakeKernel: c.(*fakeKernel), n: 700, sig: sig}, nil
	}
	var errb strings.Builder
	st := RestoreMain([]string{"ipvsadm-restore"}, strings.NewReader(input.String()), io.Discard, &errb, RestoreEnv{Env: env, Scratch: scratch, Getenv: envOf(), Interrupt: sig})
	if st != 128+int(syscall.SIGTERM) {
		t.Fatalf("status %d, want %d; stderr %q", st, 128+int(syscall.SIGTERM), errb.String())
	}
	m := regexp.MustCompile(`^ipvsadm-restore: interrupted: the table holds what input lines up to (\d+) restored; later lines were not restored\n$`).FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("stderr %q", errb.String())
	}
	last, _ := strconv.Atoi(m[1])
	restored := last - 1 // input line 1 is the comment
	if restored != 700 {
		t.Fatalf("stopped after %d services, want 700 (the signal came at the 700th)", restored)
	}
	svcs, err := f.Services()
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs) != restored {
		t.Errorf("%d services in the table, the report says %d", len(svcs), restored)
	}
	for _, s := range svcs {
		a := s.Addr.As4()
		if i := int(a[2])*250 + int(a[3]) - 1; i >= restored {
			t.Errorf("service %v (line %d) is in the table, after the last line reported", s.Addr, i+2)
		}
	}

	// Before the flush: nothing changes.
	f = tableWith(t)
	early := make(chan os.Signal, 1)
	early <- syscall.SIGINT
	errb.Reset()
	st = RestoreMain([]string{"ipvsadm-restore"}, strings.NewReader("-A -t 10.0.0.2:80\n"), io.Discard, &errb, RestoreEnv{Env: fakeEnv(t, f), Scratch: scratch, Getenv: envOf(), Interrupt: early})
	if st != 130 || errb.String() != "ipvsadm-restore: interrupted before the table was changed\n" {
		t.Errorf("status %d, stderr %q; want 130 and a report", st, errb.String())
	}
	if got := saved(t, f); got != untouched {
		t.Errorf("table %q, want untouched", got)
	}

	// During the trial: nothing changes either.
	f = tableWith(t)
	sig = make(chan os.Signal, 1)
	errb.Reset()
	st = RestoreMain([]string{"ipvsadm-restore"}, strings.NewReader(input.String()), io.Discard, &errb, RestoreEnv{Env: fakeEnv(t, f), Getenv: envOf(), Interrupt: sig, Scratch: func() (ipvs.Client, error) {
		return &interruptingKernel{fakeKernel: &fakeKernel{ipvstest.New()}, n: 700, sig: sig}, nil
	}})
	if st != 128+int(syscall.SIGTERM) || errb.String() != "ipvsadm-restore: interrupted before the table was changed\n" {
		t.Errorf("signal during the trial: status %d, stderr %q; want %d and a report", st, errb.String(), 128+int(syscall.SIGTERM))
	}
	if got := saved(t, f); got != untouched {
		t.Errorf("signal during the trial: table %q, want untouched", got)
	}
}

// changingKernel adds a service each time the table is opened, for the
// first n opens: every read of the table differs from the one before.
func changingEnv(t *testing.T, f *ipvstest.Fake, n int) ipvsadm.Env {
	env := fakeEnv(t, f)
	open := env.Open
	opens := 0
	env.Open = func() (ipvs.Client, error) {
		opens++
		if opens <= n {
			if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &ipvs.Service{
				Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: mustAddr("10.8.8.8"), Port: uint16(opens),
				Scheduler: "rr", Netmask: 0xffffffff}}); err != nil {
				t.Fatal(err)
			}
		}
		return open()
	}
	return env
}

// TestSaveScriptRereadsChangingTable: ipvsadm-save writes a table only
// once two reads in a row agree, and fails when none do.
func TestSaveScriptRereadsChangingTable(t *testing.T) {
	f := ipvstest.New()
	var out, errb strings.Builder
	st := SaveMain([]string{"ipvsadm-save", "-n"}, nil, &out, &errb, changingEnv(t, f, 3))
	want := "-A -t 10.8.8.8:1 -s rr\n-A -t 10.8.8.8:2 -s rr\n-A -t 10.8.8.8:3 -s rr\n"
	if st != 0 || out.String() != want || errb.Len() > 0 {
		t.Errorf("status %d, stdout %q, stderr %q; want 0, %q", st, out.String(), errb.String(), want)
	}
	f = ipvstest.New()
	out.Reset()
	errb.Reset()
	st = SaveMain([]string{"ipvsadm-save", "-n"}, nil, &out, &errb, changingEnv(t, f, savePasses))
	if st != 1 || out.Len() > 0 || errb.String() != "ipvsadm-save: the IPVS table changed during each of 10 reads; nothing written\n" {
		t.Errorf("never the same: status %d, stdout %q, stderr %q", st, out.String(), errb.String())
	}
}

type fullWriter struct{ n int }

func (w *fullWriter) Write(b []byte) (int, error) {
	w.n++
	return 0, &os.PathError{Op: "write", Path: "/dev/stdout", Err: unix.ENOSPC}
}

// TestSaveScriptWriteError: a full disk makes ipvsadm-save fail (Debian's
// exits 0), and ipvsadm -S itself keeps ignoring it.
func TestSaveScriptWriteError(t *testing.T) {
	f := tableWith(t)
	var errb strings.Builder
	w := &fullWriter{}
	if st := SaveMain([]string{"ipvsadm-save", "-n"}, nil, w, &errb, fakeEnv(t, f)); st != 1 || errb.String() != "ipvsadm-save: writing standard output: No space left on device\n" || w.n != 1 {
		t.Errorf("status %d, stderr %q, %d writes", st, errb.String(), w.n)
	}
	errb.Reset()
	if st := ipvsadm.Main([]string{"ipvsadm", "-S", "-n"}, nil, &fullWriter{}, &errb, fakeEnv(t, f)); st != 0 || errb.Len() > 0 {
		t.Errorf("ipvsadm -S: status %d, stderr %q; want 0 and nothing, as ipvsadm 1.31", st, errb.String())
	}
}

// FuzzRestoreScriptRefusal: whatever the input, a refused restore leaves
// the table exactly as it was, and a restore that was not refused ran.
func FuzzRestoreScriptRefusal(f *testing.F) {
	for _, s := range []string{"-A -t 10.0.0.2:80\n", "-A -t 10.0.0.2:80\n  # x\n", "\x00", "-n\n", "# c\n-a -t 10.9.9.9:1 -r 10.1.1.1\n", "-A -t 10.0.0.2:80 -s\n-R\n"} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, input []byte, utf8 bool) {
		fk := tableWith(t)
		var errb strings.Builder
		getenv := envOf()
		if utf8 {
			getenv = envOf("LANG", "C.UTF-8")
		}
		st := restoreScript([]string{"ipvsadm-restore"}, strings.NewReader(string(input)), io.Discard, &errb, fakeEnv(t, fk), getenv)
		refusedRun := strings.HasSuffix(errb.String(), refused)
		if refusedRun && (st != 1 || saved(t, fk) != untouched) {
			t.Fatalf("refused with status %d, table %q", st, saved(t, fk))
		}
		if !refusedRun && saved(t, fk) == untouched && len(strings.TrimSpace(string(input))) == 0 {
			t.Fatalf("empty input was not restored (the table must be flushed)")
		}
	})
}
