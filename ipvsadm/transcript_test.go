package ipvsadm_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"
)

// The transcripts of the real ipvsadm 1.31 (testscripts/golden/rN.txtar)
// and the edge cases recorded from it (testscripts/golden/edges.txtar) are
// testscript files: each step runs its recorded shell command, with
// "ipvsadm" being this package over a fake kernel, and compares the exit
// status, stdout and stderr with the real binary's. Beyond testscript's
// own commands the scripts use:
//
//	sh STATUS 'command'   run command with /bin/sh -c, as the recorder did,
//	                      and require exit status STATUS
//	fake-interfaces LIST  the network interfaces the fake has from now on
//	fake-counters FILE... give the fake's services and destinations the
//	                      counters these recorded numeric listings show
//	                      (standing in for traffic the fake cannot carry)
//	fake-order FILE       dump services in the order this recorded --nosort
//	                      listing shows (the kernel's hash order)
//	fake-save NAME        remember the fake's state as NAME
//	fake-load NAME        go back to the state saved as NAME

// transcriptDir holds the transcripts, their hosts file and README.md.
var transcriptDir = filepath.Join("..", "testscripts", "golden")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ipvsadm": func() { os.Exit(ipvsadmMain()) },
	})
}

// transcripts are the scripts replayed; restoring is the subset replayed
// again with the sequential restore engine.
var (
	transcripts = []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "edges"}
	restoring   = []string{"r3", "r12", "edges"}
)

func TestTranscripts(t *testing.T) {
	for _, engine := range []string{"pipelined", "sequential"} {
		names := transcripts
		if engine == "sequential" {
			names = restoring
		}
		t.Run(engine, func(t *testing.T) {
			testscript.Run(t, transcriptParams(t, engine, names))
		})
	}
}

func transcriptParams(t *testing.T, engine string, names []string) testscript.Params {
	dir, err := filepath.Abs(transcriptDir)
	if err != nil {
		t.Fatal(err)
	}
	services, err := filepath.Abs(filepath.Join("testdata", "services"))
	if err != nil {
		t.Fatal(err)
	}
	standIns := writeStandIns(t)
	var files []string
	for _, n := range names {
		files = append(files, filepath.Join(dir, n+".txtar"))
	}
	return testscript.Params{
		Files:              files,
		RequireUniqueNames: true,
		ContinueOnError:    true,
		Setup: func(env *testscript.Env) error {
			fake := filepath.Join(env.WorkDir, ".fake")
			if err := os.Mkdir(fake, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(fake, "conns"), []byte(connHeader), 0o644); err != nil {
				return err
			}
			// The recorder's /tmp is the script's own.
			if err := os.Mkdir(filepath.Join(env.WorkDir, "tmp"), 0o755); err != nil {
				return err
			}
			env.Setenv("PATH", standIns+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("LANG", "C")
			env.Setenv("LC_ALL", "C")
			env.Setenv("HOME", env.WorkDir)
			env.Setenv(fakeDirEnv, fake)
			env.Setenv(hostsEnv, filepath.Join(dir, "hosts"))
			env.Setenv(servicesEnv, services)
			env.Setenv(engineEnv, engine)
			return nil
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"sh":              cmdSh,
			"fake-interfaces": cmdFakeInterfaces,
			"fake-counters":   cmdFakeCounters,
			"fake-order":      cmdFakeOrder,
			"fake-save":       cmdFakeSave,
			"fake-load":       cmdFakeLoad,
		},
	}
}

// connHeader is /proc/net/ip_vs_conn of a kernel without connections.
const connHeader = "Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n"

// standIns are shell scripts put first in PATH: the wrapper scripts as the
// reference describes them (docs/reference/ipvsadm-1.31.md §11) and su,
// which here only drops the privilege of the ipvsadm it runs.
var standIns = map[string]string{
	"su": `#!/bin/sh
# su nobody -s /bin/sh -c CMD: run CMD as a user without CAP_NET_ADMIN.
shift 3
[ "$1" = -c ] && shift
` + nonRootEnv + `=1 exec /bin/sh -c "$1"
`,
	"ipvsadm-restore": `#!/bin/bash
INPUT=$(grep -v '^#')
ipvsadm -C
echo "$INPUT" | ipvsadm -R
`,
	"ipvsadm-save": `#!/bin/bash
NUMERIC=
for arg in "$@"; do
	case "$arg" in
	-n) NUMERIC=-n ;;
	-*) echo "$(basename $0): Script to save the IPVS table to stdout." >&2
	    echo "   With the -n option, prints out the table in numeric format." >&2
	    exit 1 ;;
	esac
done
ipvsadm -S $NUMERIC
`,
}

func writeStandIns(t *testing.T) string {
	dir := t.TempDir()
	for name, script := range standIns {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// cmdSh runs a recorded command line and checks its exit status; the
// status is the shell's, 128+signal if it was killed (a crash of ipvsadm
// 1.31 is a SIGSEGV).
func cmdSh(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sh STATUS 'command'")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("sh: status %q: %v", args[0], err)
	}
	line := args[1]
	if prog := disallowed(line); prog != "" {
		ts.Fatalf("sh: %q runs %s, which would act on this host or needs the recording VM: leave the step out with a reason", line, prog)
	}
	line = strings.ReplaceAll(line, "/tmp/", ts.MkAbs("tmp")+"/")
	if rest, ok := strings.CutPrefix(line, "/usr/sbin/ipvsadm "); ok {
		line = "ipvsadm " + rest
		ts.Setenv(argv0Env, "/usr/sbin/ipvsadm")
		defer ts.Setenv(argv0Env, "")
	}
	status := 0
	err = ts.Exec("/bin/sh", "-c", line)
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		status = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = 128 + int(ws.Signal())
		}
	case err != nil:
		ts.Fatalf("sh: %v", err)
	}
	if status != want {
		ts.Fatalf("exit status %d, want %d", status, want)
	}
}

// allowedCommands are the programs a step may run; anything else (ip, dd,
// sleep, ...) would touch the host or depends on the VM.
var allowedCommands = map[string]bool{
	"ipvsadm": true, "ipvsadm-save": true, "ipvsadm-restore": true, "su": true,
	"echo": true, "printf": true, "head": true, "sed": true, "grep": true,
	"cat": true, "diff": true, "tail": true, "for": true, "done": true, "true": true,
}

var (
	quoted       = regexp.MustCompile(`'[^']*'|"(?:[^"\\]|\\.)*"`)
	redirection  = regexp.MustCompile(`[0-9]*>&[0-9]+`)
	commandStart = regexp.MustCompile(`(?:^|[;|&(])\s*(?:do\s+)?(?:[A-Z_]+=\S*\s+)*([^\s;|&()]+)`)
)

// disallowed returns the first program of line that a step must not run,
// or "" if it may.
func disallowed(line string) string {
	for _, sys := range []string{"/proc/", "/etc/", "/dev/udp", "/dev/tcp"} {
		if strings.Contains(line, sys) {
			return sys
		}
	}
	unquoted := redirection.ReplaceAllString(quoted.ReplaceAllString(line, "Q"), "")
	for _, m := range commandStart.FindAllStringSubmatch(unquoted, -1) {
		if name := m[1]; name != "/usr/sbin/ipvsadm" && !allowedCommands[name] {
			return name
		}
	}
	return ""
}

func cmdFakeInterfaces(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fake-interfaces NAME,NAME...")
	}
	ts.Setenv(ifacesEnv, args[0])
}

// cmdFakeCounters logs the listings whose counters the fake takes from
// here on. The files are read now, so a listing that does not parse fails
// here rather than in every later ipvsadm.
func cmdFakeCounters(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: fake-counters FILE...")
	}
	paths := absPaths(ts, args)
	if _, err := readListings(paths...); err != nil {
		ts.Fatalf("fake-counters: %v", err)
	}
	appendLog(filepath.Join(ts.Getenv(fakeDirEnv), "log"), logEntry{Counters: paths})
}

func cmdFakeOrder(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fake-order FILE")
	}
	paths := absPaths(ts, args)
	if _, err := readListings(paths...); err != nil {
		ts.Fatalf("fake-order: %v", err)
	}
	ts.Check(os.WriteFile(filepath.Join(ts.Getenv(fakeDirEnv), "order"), []byte(paths[0]+"\n"), 0o644))
}

func absPaths(ts *testscript.TestScript, files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = ts.MkAbs(f)
	}
	return out
}

// fakeState are the files of the fake directory that make its table.
var fakeState = []string{"log", "order"}

func cmdFakeSave(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fake-save NAME")
	}
	copyFakeState(ts, ts.Getenv(fakeDirEnv), ts.Getenv(fakeDirEnv)+"-"+args[0])
}

func cmdFakeLoad(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fake-load NAME")
	}
	from := ts.Getenv(fakeDirEnv) + "-" + args[0]
	if _, err := os.Stat(from); err != nil {
		ts.Fatalf("fake-load: no state saved as %s", args[0])
	}
	copyFakeState(ts, from, ts.Getenv(fakeDirEnv))
}

// copyFakeState makes to's state files what from's are (absent where
// from's are absent).
func copyFakeState(ts *testscript.TestScript, from, to string) {
	ts.Check(os.MkdirAll(to, 0o755))
	for _, name := range fakeState {
		data, err := os.ReadFile(filepath.Join(from, name))
		if errors.Is(err, os.ErrNotExist) {
			err = os.Remove(filepath.Join(to, name))
			if errors.Is(err, os.ErrNotExist) {
				err = nil
			}
			ts.Check(err)
			continue
		}
		ts.Check(err)
		ts.Check(os.WriteFile(filepath.Join(to, name), data, 0o644))
	}
}

// stepHeading starts a step's part of a script: "# NNN" and what follows.
var stepHeading = regexp.MustCompile(`(?m)^# ([0-9]{3})\b`)

// TestTranscriptsAccountForEveryStep keeps the scripts honest: each
// recorded output in an archive is compared by its step, or the step says
// why not ("not run: <reason>", or "stderr not compared: <reason>"), so a
// script cannot quietly stop checking a recording.
func TestTranscriptsAccountForEveryStep(t *testing.T) {
	for _, name := range transcripts {
		a, err := txtar.ParseFile(filepath.Join(transcriptDir, name+".txtar"))
		if err != nil {
			t.Fatal(err)
		}
		script := string(a.Comment)
		steps := map[string]string{} // step → its part of the script
		heads := stepHeading.FindAllStringSubmatchIndex(script, -1)
		for i, h := range heads {
			end := len(script)
			if i+1 < len(heads) {
				end = heads[i+1][0]
			}
			steps[script[h[2]:h[3]]] += script[h[0]:end]
		}
		compared := 0
		for _, f := range a.Files {
			if f.Name == "empty" {
				continue
			}
			id, ext, _ := strings.Cut(f.Name, ".")
			part, ok := steps[id]
			stream := map[string]string{"out": "stdout", "err": "stderr"}[ext]
			switch {
			case !ok || stream == "":
				t.Errorf("%s: %s belongs to no step", name, f.Name)
			case strings.Contains(part, "not run:"),
				strings.Contains(part, stream+" not compared:"):
			case strings.Contains(part, "\ncmp "+stream+" "+f.Name+"\n"):
				compared++
			default:
				t.Errorf("%s: step %s neither compares %s nor says why not", name, id, f.Name)
			}
		}
		if compared == 0 {
			t.Errorf("%s compares nothing", name)
		}
	}
}
