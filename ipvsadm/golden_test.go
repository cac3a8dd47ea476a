package ipvsadm_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The golden replay runs the shell commands of the real ipvsadm's
// transcripts (testscripts/golden/rN/NNN.cmd) with /bin/sh, in order, with
// "ipvsadm" being this package over a fake kernel whose state carries from
// one command to the next, and compares stdout, stderr and the status with
// what the real binary produced.

// goldenDir holds the transcripts of the real ipvsadm 1.31.
var goldenDir = filepath.Join("..", "testscripts", "golden")

// replaySet is a directory of transcripts replayed in one fake kernel.
type replaySet struct {
	name, dir string
	// setup is run before each step, its output not compared.
	setup string
	// engine is the restore engine: "" for the one cmd/ipvsadm uses
	// (ipvsadm.Pipelined), "sequential" for ipvsadm.RestoreSequential.
	engine string
}

// replaySets are the transcript directories replayed: the golden
// transcripts, and testdata/edges, edge cases recorded from the real
// ipvsadm 1.31 in the same kind of VM (their commands are testscripts/differential/edges.txt),
// each from the same start state. Golden r4, r8 and r9 are left out whole:
// they are about real traffic (connection entries, counters, rates), which
// the fake cannot produce.
var replaySets = []replaySet{
	{name: "r0"}, {name: "r1"}, {name: "r2"}, {name: "r3"}, {name: "r5"}, {name: "r6"},
	{name: "r7"}, {name: "r10"}, {name: "r11"}, {name: "r12"},
	{name: "edges", dir: filepath.Join("testdata", "edges"), setup: edgeSetup},
	// The sets that restore, again with the sequential engine.
	{name: "r3", engine: "sequential"}, {name: "r12", engine: "sequential"},
	{name: "edges", dir: filepath.Join("testdata", "edges"), setup: edgeSetup, engine: "sequential"},
}

// edgeSetup is the start state of every edge case.
const edgeSetup = "ipvsadm -C; ipvsadm --stop-daemon master 2>/dev/null; ipvsadm --stop-daemon backup 2>/dev/null; " +
	"ipvsadm --set 900 120 300; ipvsadm -A -t 10.0.0.1:80 -s rr; ipvsadm -a -t 10.0.0.1:80 -r 192.168.10.1 -m; true"

// notRun are steps that are not executed at all, with the reason.
var notRun = map[string]string{
	"r0/004": "inspects the VM (/etc/hosts, ls, lsmod)",
	"r3/056": "creates network interfaces with ip(8); the fake gets eth0 and eth1 from here on",
	"r7/001": "creates a dummy interface and a route with ip(8) (irrelevant to the fake)",
	"r7/004": "sends traffic",
	"r7/005": "inspects the VM",
	"r7/006": "sends traffic",
	"r7/007": "counters after traffic",
	"r7/008": "counters after traffic",
	"r7/009": "rates after traffic",
	"r7/010": "reads /proc/net/ip_vs_stats",
}

// notCompared are steps that are run (their changes matter to later steps)
// but whose output cannot match, with the reason.
var notCompared = map[string]string{}

// serviceOrderFree are steps whose output lists services: the kernel dumps
// them in hash-table order, which feeds a sort whose comparator is not
// transitive (docs/reference/ipvsadm-1.31.md §6.6), so the fake's insertion order gives another order.
// Their output is compared as the header lines plus the multiset of service
// blocks (a service line with its destination lines, which must match
// exactly and in order).
var serviceOrderFree = map[string]bool{
	"r2/085": true, "r2/086": true, "r2/087": true, "r2/088": true, "r2/089": true,
	"r2/090": true, "r2/091": true, "r2/092": true, "r2/093": true, "r2/094": true,
	"r2/095": true, "r2/096": true, "r2/097": true, "r2/098": true, "r2/099": true,
	"r2/100": true, "r2/101": true, "r2/102": true, "r2/104": true,
}

// serviceBlocks splits a listing or save output into its leading lines
// (header and titles) and its service blocks, sorted.
func serviceBlocks(out string) (head string, blocks []string) {
	lines := strings.SplitAfter(out, "\n")
	i := 0
	for i < len(lines) && (strings.HasPrefix(lines[i], "IP Virtual Server") || strings.HasPrefix(lines[i], "Prot ") || strings.HasPrefix(lines[i], "  -> RemoteAddress")) {
		head += lines[i]
		i++
	}
	for ; i < len(lines); i++ {
		if lines[i] == "" {
			continue
		}
		if strings.HasPrefix(lines[i], "  -> ") || strings.HasPrefix(lines[i], "-a ") {
			if len(blocks) == 0 {
				blocks = append(blocks, "")
			}
			blocks[len(blocks)-1] += lines[i]
			continue
		}
		blocks = append(blocks, lines[i])
	}
	sort.Strings(blocks)
	return head, blocks
}

// sameOutput compares outputs exactly, or block-wise for serviceOrderFree
// steps.
func sameOutput(id, got, want string) bool {
	if !serviceOrderFree[id] {
		return got == want
	}
	gh, gb := serviceBlocks(got)
	wh, wb := serviceBlocks(want)
	return gh == wh && strings.Join(gb, "\x00") == strings.Join(wb, "\x00")
}

// interfacesFrom gives the fake's network interfaces from a step on, as the
// transcripts created them.
var interfacesFrom = map[string]string{
	"r3/056": "lo,eth0,eth1",
}

// allowedCommands are the programs a replayed step may run; anything else
// (ip, dd, sleep, ...) would touch the host or depends on the VM.
var allowedCommands = map[string]bool{
	"ipvsadm": true, "ipvsadm-save": true, "ipvsadm-restore": true, "su": true,
	"echo": true, "printf": true, "head": true, "sed": true, "grep": true,
	"cat": true, "diff": true, "tail": true, "for": true, "done": true,
}

var quoted = regexp.MustCompile(`'[^']*'|"(?:[^"\\]|\\.)*"`)

var redirection = regexp.MustCompile(`[0-9]*>&[0-9]+`)

var commandStart = regexp.MustCompile(`(?:^|[;|&(])\s*(?:do\s+)?(?:[A-Z_]+=\S*\s+)*([^\s;|&()]+)`)

// disallowed returns the first program of cmd that the replay must not run,
// or "" if it may.
func disallowed(cmd string) string {
	if strings.Contains(cmd, "/proc/") || strings.Contains(cmd, "/etc/") || strings.Contains(cmd, "/dev/udp") || strings.Contains(cmd, "/dev/tcp") {
		return "system files"
	}
	unquoted := redirection.ReplaceAllString(quoted.ReplaceAllString(cmd, "Q"), "")
	for _, m := range commandStart.FindAllStringSubmatch(unquoted, -1) {
		name := m[1]
		if name == "/usr/sbin/ipvsadm" {
			continue
		}
		if !allowedCommands[name] {
			return name
		}
	}
	return ""
}

// standIns are shell scripts put first in PATH: the wrapper scripts as the
// reference describes them (§11) and su, which here only drops the privilege of
// the ipvsadm it runs.
var standIns = map[string]string{
	"su": `#!/bin/sh
# su nobody -s /bin/sh -c CMD: run CMD as a user without CAP_NET_ADMIN.
shift 3
[ "$1" = -c ] && shift
LVSKIT_IPVSADM_NONROOT=1 exec /bin/sh -c "$1"
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

// connHeader is /proc/net/ip_vs_conn of a kernel without connections.
const connHeader = "Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n"

type goldenStep struct {
	id, cmd        string
	stdout, stderr string
	status         int
	dir, name      string
}

func loadSteps(t *testing.T, set replaySet) []goldenStep {
	t.Helper()
	dir := set.name
	path := set.dir
	if path == "" {
		path = filepath.Join(goldenDir, dir)
	}
	cmds, err := filepath.Glob(filepath.Join(path, "*.cmd"))
	if err != nil || len(cmds) == 0 {
		t.Fatalf("no transcripts in %s: %v", dir, err)
	}
	sort.Strings(cmds)
	var steps []goldenStep
	for _, c := range cmds {
		base := strings.TrimSuffix(c, ".cmd")
		name := filepath.Base(base)
		read := func(ext string) string {
			b, err := os.ReadFile(base + ext)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		rc, err := strconv.Atoi(strings.TrimSpace(read(".rc")))
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, goldenStep{
			id: dir + "/" + name, cmd: strings.TrimSuffix(read(".cmd"), "\n"),
			stdout: read(".out"), stderr: read(".err"), status: rc, dir: dir, name: name,
		})
	}
	return steps
}

func TestGoldenReplay(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Fatalf("the replay needs /bin/sh: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	golden, err := filepath.Abs(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	services, err := filepath.Abs(filepath.Join("testdata", "services"))
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range replaySets {
		dir := set.name
		title := dir
		if set.engine != "" {
			title += "-" + set.engine
		}
		t.Run(title, func(t *testing.T) {
			t.Parallel()
			compared, skipped := 0, 0
			defer func() { t.Logf("%s: compared %d steps, %d excluded", title, compared, skipped) }()
			tmp := t.TempDir()
			bin := filepath.Join(tmp, "bin")
			if err := os.Mkdir(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(self, filepath.Join(bin, "ipvsadm")); err != nil {
				t.Fatal(err)
			}
			for name, script := range standIns {
				if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			connFile := filepath.Join(tmp, "ip_vs_conn")
			if err := os.WriteFile(connFile, []byte(connHeader), 0o644); err != nil {
				t.Fatal(err)
			}
			ifaces := ""
			statePath := filepath.Join(tmp, "state.log")
			var startState []byte
			for _, st := range loadSteps(t, set) {
				if v, ok := interfacesFrom[st.id]; ok {
					ifaces = v
				}
				if reason, ok := notRun[st.id]; ok {
					t.Logf("%s not run: %s", st.id, reason)
					skipped++
					continue
				}
				if prog := disallowed(st.cmd); prog != "" {
					t.Errorf("%s runs %q: add it to notRun with a reason", st.id, prog)
					continue
				}
				cmd := strings.ReplaceAll(st.cmd, "/tmp/", tmp+"/")
				env := []string{
					"PATH=" + bin + ":/usr/bin:/bin",
					"LANG=C", "LC_ALL=C",
					"HOME=" + tmp,
					helperEnv + "=" + statePath,
					helperGolden + "=" + golden,
					helperConnFile + "=" + connFile,
					helperServices + "=" + services,
				}
				if ifaces != "" {
					env = append(env, helperIfaces+"="+ifaces)
				}
				if set.engine != "" {
					env = append(env, helperEngine+"="+set.engine)
				}
				if strings.HasPrefix(cmd, "/usr/sbin/ipvsadm ") {
					cmd = strings.TrimPrefix(cmd, "/usr/sbin/")
					env = append(env, helperArgv0+"=/usr/sbin/ipvsadm")
				}
				if set.setup != "" {
					// The fake is deterministic: the state the setup
					// leaves is computed once and restored before each
					// step.
					if startState == nil {
						if _, _, status := runShell(t, tmp, set.setup, env); status != 0 {
							t.Fatalf("%s: setup failed with status %d", st.id, status)
						}
						var err error
						if startState, err = os.ReadFile(statePath); err != nil {
							t.Fatal(err)
						}
					}
					if err := os.WriteFile(statePath, startState, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				stdout, stderr, status := runShell(t, tmp, cmd, env)
				if reason, ok := notCompared[st.id]; ok {
					t.Logf("%s not compared: %s", st.id, reason)
					skipped++
					continue
				}
				compared++
				if !sameOutput(st.id, stdout, st.stdout) || stderr != st.stderr || status != st.status {
					t.Errorf("%s: %s\n--- status: got %d, want %d\n--- stdout got:\n%s--- stdout want:\n%s--- stderr got:\n%s--- stderr want:\n%s",
						st.id, st.cmd, status, st.status, stdout, st.stdout, stderr, st.stderr)
				}
			}
		})
	}
}

// runShell runs cmd with /bin/sh -c in dir with env; the status is the
// shell's, 128+signal if it was killed.
func runShell(t *testing.T, dir, cmd string, env []string) (stdout, stderr string, status int) {
	t.Helper()
	sh := exec.Command("/bin/sh", "-c", cmd)
	sh.Dir = dir
	sh.Env = env
	var out, errb bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &errb
	err := sh.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		status = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = 128 + int(ws.Signal())
		}
	} else if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return out.String(), errb.String(), status
}
