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
	if st := SaveScript([]string{"ipvsadm-save", "-n"}, &out, io.Discard, fakeEnv(t, f)); st != 0 {
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
			st := RestoreScript([]string{"ipvsadm-restore"}, tc.stdin, &out, &errb, fakeEnv(t, f), tc.getenv)
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
	if st := RestoreScript([]string{"ipvsadm-restore"}, strings.NewReader("# \xff\n-A -t 10.0.0.2:80\n"), io.Discard, &errb, fakeEnv(t, f), envOf("LANG", "C")); st != 0 || errb.Len() > 0 {
		t.Errorf("C locale: status %d, stderr %q", st, errb.String())
	}
}

func TestRestoreScriptCheckOnly(t *testing.T) {
	for input, want := range map[string]int{"-A -t 10.0.0.2:80\n": 0, "-A -t 10.0.0.2\n-A\n": 1} {
		f := tableWith(t)
		st := RestoreScript([]string{"ipvsadm-restore"}, strings.NewReader(input), io.Discard, io.Discard, fakeEnv(t, f), envOf("LVSKIT_RESTORE_CHECK", "1"))
		if st != want {
			t.Errorf("%q: status %d, want %d", input, st, want)
		}
		if got := saved(t, f); got != untouched {
			t.Errorf("%q: the check changed the table: %q", input, got)
		}
	}
}

// TestRestoreScriptStrict: with LVSKIT_RESTORE_STRICT=1 (the unit's boot
// restore) a line the kernel refused fails the run and is named by its
// input line number; without it, the status is the last line's.
func TestRestoreScriptStrict(t *testing.T) {
	input := "# header\n-A -t 10.0.0.2:80\n\n-A -t 10.0.0.2:80\n# c\n-A -t 10.0.0.3:80 -s nosuch\n-A -t 10.0.0.4:80\n"
	for _, strict := range []bool{false, true} {
		f := tableWith(t)
		var errb strings.Builder
		getenv := envOf()
		if strict {
			getenv = envOf("LVSKIT_RESTORE_STRICT", "1")
		}
		st := RestoreScript([]string{"ipvsadm-restore"}, strings.NewReader(input), io.Discard, &errb, fakeEnv(t, f), getenv)
		want, wantErr := 0, "Service already exists\nScheduler or persistence engine not found\n"
		if strict {
			want, wantErr = 1, wantErr+"ipvsadm-restore: 2 lines failed (input lines 4, 6); the table does not hold what they ask for\n"
		}
		if st != want || errb.String() != wantErr {
			t.Errorf("strict %v: status %d, stderr %q; want %d, %q", strict, st, errb.String(), want, wantErr)
		}
	}
	// A line that ends the restore early (-h) is a failure in strict mode.
	f := tableWith(t)
	var errb strings.Builder
	st := RestoreScript([]string{"ipvsadm-restore"}, strings.NewReader("-A -t 10.0.0.2:80\n-v\n-A -t 10.0.0.3:80\n"), io.Discard, &errb, fakeEnv(t, f), envOf("LVSKIT_RESTORE_STRICT", "1"))
	if st != 1 || !strings.Contains(errb.String(), "the restore ended at input line 2; later lines were not restored") {
		t.Errorf("early end: status %d, stderr %q", st, errb.String())
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
// input line restored and the table holds exactly the lines before it.
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
	st := RestoreRun{Args: []string{"ipvsadm-restore"}, Stdin: strings.NewReader(input.String()), Stdout: io.Discard, Stderr: &errb,
		Env: env, Getenv: envOf(), Interrupt: sig}.Run()
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
	st = RestoreRun{Args: []string{"ipvsadm-restore"}, Stdin: strings.NewReader("-A -t 10.0.0.2:80\n"), Stdout: io.Discard, Stderr: &errb,
		Env: fakeEnv(t, f), Getenv: envOf(), Interrupt: early}.Run()
	if st != 130 || errb.String() != "ipvsadm-restore: interrupted before the table was changed\n" {
		t.Errorf("status %d, stderr %q; want 130 and a report", st, errb.String())
	}
	if got := saved(t, f); got != untouched {
		t.Errorf("table %q, want untouched", got)
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
	st := SaveScript([]string{"ipvsadm-save", "-n"}, &out, &errb, changingEnv(t, f, 3))
	want := "-A -t 10.8.8.8:1 -s rr\n-A -t 10.8.8.8:2 -s rr\n-A -t 10.8.8.8:3 -s rr\n"
	if st != 0 || out.String() != want || errb.Len() > 0 {
		t.Errorf("status %d, stdout %q, stderr %q; want 0, %q", st, out.String(), errb.String(), want)
	}
	f = ipvstest.New()
	out.Reset()
	errb.Reset()
	st = SaveScript([]string{"ipvsadm-save", "-n"}, &out, &errb, changingEnv(t, f, savePasses))
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
	if st := SaveScript([]string{"ipvsadm-save", "-n"}, w, &errb, fakeEnv(t, f)); st != 1 || errb.String() != "ipvsadm-save: writing standard output: No space left on device\n" || w.n != 1 {
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
		st := RestoreScript([]string{"ipvsadm-restore"}, strings.NewReader(string(input)), io.Discard, &errb, fakeEnv(t, fk), getenv)
		refusedRun := strings.HasSuffix(errb.String(), refused)
		if refusedRun && (st != 1 || saved(t, fk) != untouched) {
			t.Fatalf("refused with status %d, table %q", st, saved(t, fk))
		}
		if !refusedRun && saved(t, fk) == untouched && len(strings.TrimSpace(string(input))) == 0 {
			t.Fatalf("empty input was not restored (the table must be flushed)")
		}
	})
}
