package completions_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/packaging/hosttool"
)

// fakeTable is what the fake ipvsadm prints for `ipvsadm -S -n`: one service
// of every kind, IPv4 and IPv6, fwmark services with and without -6.
const fakeTable = `-A -t 10.0.0.1:80 -s wlc
-a -t 10.0.0.1:80 -r 192.168.10.1:80 -m -w 1
-a -t 10.0.0.1:80 -r 192.168.10.2:8080 -m -w 1
-A -t [2001:db8::1]:443 -s rr
-a -t [2001:db8::1]:443 -r [2001:db8::a]:443 -g -w 1
-A -u 10.0.0.2:53 -s rr
-A --sctp-service 10.0.0.3:5060 -s rr
-A -f 1 -s sh -p 600 -b sh-port
-a -f 1 -r 192.168.10.3:0 -m -w 1
-A -f 2 -6 -s rr
-a -f 2 -6 -r [2001:db8::b]:0 -m -w 1
`

// fakeIpvsadmPath returns a PATH whose first directory holds an ipvsadm that
// answers `-S -n` with fakeTable and fails like a kernel without IPVS
// otherwise, so the completions' dynamic part is deterministic.
func fakeIpvsadmPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\nif [ \"$1 $2\" = \"-S -n\" ] && [ $# -eq 2 ]; then\ncat <<'EOF'\n" + fakeTable + "EOF\nexit 0\nfi\nexit 2\n"
	if err := os.WriteFile(filepath.Join(dir, "ipvsadm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// run executes a shell command with PATH set and returns its stdout; any
// stderr output or failure fails the test.
func run(t *testing.T, path string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "PATH="+path, "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %q: %v\nstdout:\n%s\nstderr:\n%s", name, args, err, stdout.String(), stderr.String())
	}
	if stderr.Len() > 0 {
		t.Fatalf("%s %q wrote to stderr:\n%s", name, args, stderr.String())
	}
	return stdout.String()
}

// splitResults splits harness output at its "<<END>>" lines into one sorted,
// de-duplicated candidate list per input line.
func splitResults(t *testing.T, out string, n int) [][]string {
	t.Helper()
	var res [][]string
	var cur []string
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "<<END>>":
			slices.Sort(cur)
			res = append(res, slices.Compact(cur))
			cur = nil
		case line != "":
			cur = append(cur, line)
		}
	}
	if len(res) != n {
		t.Fatalf("harness answered %d lines, want %d:\n%s", len(res), n, out)
	}
	return res
}

// Completer returns the candidates for each command line (cursor at the end).
type completer func(t *testing.T, lines []string) [][]string

// completionCheck is a command line and the words completion must offer
// after it.
type completionCheck struct {
	line string
	want []string
}

// inEveryShell completes every check's line in bash, zsh and fish (one
// shell process each, in parallel) and hands each answer to compare.
func inEveryShell(t *testing.T, checks []completionCheck, compare func(t *testing.T, shell string, c completionCheck, got []string)) {
	lines := make([]string, len(checks))
	for i, c := range checks {
		lines[i] = c.line
	}
	for _, shell := range []struct {
		name     string
		complete completer
	}{{"bash", bashCompleter(true)}, {"zsh", zshCompleter}, {"fish", fishCompleter}} {
		t.Run(shell.name, func(t *testing.T) {
			t.Parallel()
			got := shell.complete(t, lines)
			for i, c := range checks {
				compare(t, shell.name, c, got[i])
			}
		})
	}
}

// offersExactly is inEveryShell's comparison for the subcommand tools:
// the words offered, sorted and without repeats, equal the wanted ones.
func offersExactly(t *testing.T, shell string, c completionCheck, got []string) {
	if !slices.Equal(got, join(c.want)) {
		t.Errorf("%s: %q\n got: %q\nwant: %q", shell, c.line, got, join(c.want))
	}
}

func bashCompleter(withBashCompletion bool) completer {
	return func(t *testing.T, lines []string) [][]string {
		t.Helper()
		hosttool.Require(t, "bash", "bash")
		lib := ""
		if withBashCompletion {
			lib = hosttool.RequireFile(t, "/usr/share/bash-completion/bash_completion", "bash-completion")
		}
		cmd := exec.Command("bash", "--norc", "--noprofile", "testdata/complete.bash", lib, "bash")
		cmd.Env = append(os.Environ(), "PATH="+fakeIpvsadmPath(t))
		cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Fatalf("bash harness: %v\n%s", err, stderr.String())
		}
		return splitResults(t, stdout.String(), len(lines))
	}
}

func zshCompleter(t *testing.T, lines []string) [][]string {
	t.Helper()
	hosttool.Require(t, "zsh", "zsh")
	out := run(t, fakeIpvsadmPath(t), "zsh", append([]string{"-f", "testdata/complete.zsh", "zsh"}, lines...)...)
	return splitResults(t, out, len(lines))
}

func fishCompleter(t *testing.T, lines []string) [][]string {
	t.Helper()
	hosttool.Require(t, "fish", "fish")
	out := run(t, fakeIpvsadmPath(t), "fish", append([]string{"-N", "testdata/complete.fish", "fish"}, lines...)...)
	return splitResults(t, out, len(lines))
}

var (
	commands = words(`-A --add-service -E --edit-service -D --delete-service -C --clear
		-R --restore -S --save -a --add-server -e --edit-server -d --delete-server
		-L -l --list -Z --zero --set --start-daemon --stop-daemon -h --help -v --version`)
	serviceOpts = words("-t --tcp-service -u --udp-service --sctp-service -f --fwmark-service")
	svcOpts     = words("-s --scheduler -p --persistent -M --netmask --pe -b --sched-flags -o --ops")
	serverOpts  = words(`-r --real-server -w --weight -x --u-threshold -y --l-threshold
		--tun-type --tun-port --tun-nocsum --tun-csum --tun-remcsum`)
	listOpts = words(`-n --numeric -c --connection --timeout --daemon --stats --rate --thresholds
		--persistent-conn --tun-info --exact -X --nosort --sort --syncid`)
	daemonOpts = words("--mcast-interface --syncid --sync-maxlen --mcast-group --mcast-port --mcast-ttl")
	schedulers = words("rr wrr lc wlc lblc lblcr dh sh sed nq fo ovf mh")
)

func words(s string) []string { return strings.Fields(s) }

func join(lists ...[]string) []string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// completionCase is one command line and the candidates every shell must
// offer; bash, zsh or fish set when that shell legitimately differs (bash
// inserts only the part after the last ':' or '=', fish repeats the
// --option= prefix, zsh completes the item of a comma list).
type completionCase struct {
	line            string
	want            []string
	bash, zsh, fish []string
}

var completionCases = []completionCase{
	{line: "ipvsadm -", want: commands},
	{line: "ipvsadm -A -", want: join(serviceOpts, svcOpts)},
	{line: "ipvsadm -E -", want: join(serviceOpts, svcOpts)},
	{line: "ipvsadm -A -f 1 -", want: join(words("-6 --ipv6"), svcOpts)},
	{line: "ipvsadm -A -t 10.0.0.9:80 -s rr -", want: join(words("-p --persistent -M --netmask --pe -b --sched-flags -o --ops"))},
	{line: "ipvsadm -D -", want: serviceOpts},
	{line: "ipvsadm -Z -", want: serviceOpts},
	{line: "ipvsadm -C -", want: nil},
	{line: "ipvsadm -R -", want: nil},
	{line: "ipvsadm -S -", want: words("-n --numeric")},
	{line: "ipvsadm -a -", want: join(serviceOpts, serverOpts, words("-g --gatewaying -i --ipip -m --masquerading"))},
	{line: "ipvsadm -a -t 10.0.0.1:80 -m -", want: serverOpts},
	{line: "ipvsadm -e -t 10.0.0.1:80 -r 192.168.10.1:80 -i --tun-csum -", want: words("-w --weight -x --u-threshold -y --l-threshold --tun-type --tun-port")},
	{line: "ipvsadm -d -t 10.0.0.1:80 -", want: words("-r --real-server")},
	{line: "ipvsadm -L -", want: join(serviceOpts, listOpts)},
	{line: "ipvsadm -l -n --stats -", want: join(serviceOpts, words(`-c --connection --timeout --daemon --rate --thresholds
		--persistent-conn --tun-info --exact -X --nosort --sort --syncid`))},
	{line: "ipvsadm --set ", want: nil},
	{line: "ipvsadm --start-daemon ", want: words("master backup")},
	{line: "ipvsadm --stop-daemon ", want: words("master backup")},
	{line: "ipvsadm --start-daemon master -", want: daemonOpts},
	{line: "ipvsadm --start-daemon backup --syncid 3 -", want: words("--mcast-interface --sync-maxlen --mcast-group --mcast-port --mcast-ttl")},
	{line: "ipvsadm --stop-daemon backup -", want: words("--syncid")},
	{line: "ipvsadm -A -t 10.0.0.9:80 -s ", want: schedulers},
	{line: "ipvsadm -E -t 10.0.0.9:80 --scheduler ", want: schedulers},
	{line: "ipvsadm -A -t 10.0.0.9:80 --scheduler=w", want: words("wlc wrr"), fish: words("--scheduler=wlc --scheduler=wrr")},
	{line: "ipvsadm -A -u 10.0.0.9:5060 -p --pe ", want: words("sip")},
	{line: "ipvsadm -A -t 10.0.0.9:80 -b ", want: words("flag-1 flag-2 flag-3")},
	{line: "ipvsadm -A -t 10.0.0.9:80 -s mh -b ", want: words("flag-1 flag-2 flag-3 mh-fallback mh-port")},
	{line: "ipvsadm -A -t 10.0.0.9:80 -s sh -b sh-port,", want: words("sh-port,flag-1 sh-port,flag-2 sh-port,flag-3 sh-port,sh-fallback"),
		zsh: words("flag-1 flag-2 flag-3 sh-fallback")},
	{line: "ipvsadm -a -t 10.0.0.1:80 -r 10.1.1.1 -i --tun-type ", want: words("ipip gue gre")},
	// The dynamic part: services and real servers of the current table.
	{line: "ipvsadm -E -t ", want: words("10.0.0.1:80 [2001:db8::1]:443")},
	{line: "ipvsadm -D --tcp-service ", want: words("10.0.0.1:80 [2001:db8::1]:443")},
	{line: "ipvsadm -a -u ", want: words("10.0.0.2:53")},
	{line: "ipvsadm -e --sctp-service ", want: words("10.0.0.3:5060")},
	{line: "ipvsadm -d -f ", want: words("1 2")},
	{line: "ipvsadm -L -t ", want: words("10.0.0.1:80 [2001:db8::1]:443")},
	{line: "ipvsadm -Z -f ", want: words("1 2")},
	{line: "ipvsadm -A -t ", want: nil},
	{line: "ipvsadm -E -t 10.0.0.1:", want: words("10.0.0.1:80"), bash: words("80")},
	{line: "ipvsadm -e -t 10.0.0.1:80 -r ", want: words("192.168.10.1:80 192.168.10.2:8080")},
	{line: "ipvsadm -d -t [2001:db8::1]:443 -r ", want: words("[2001:db8::a]:443")},
	{line: "ipvsadm -d -f 2 -6 -r ", want: words("[2001:db8::b]:0")},
	{line: "ipvsadm -e -f 1 -r ", want: words("192.168.10.3:0")},
	{line: "ipvsadm -a -t 10.0.0.1:80 -r ", want: nil},
	{line: "ipvsadm-save -", want: words("-n")},
	{line: "ipvsadm-restore -", want: nil},
}

func checkCases(t *testing.T, shell string, complete completer, cases []completionCase) {
	t.Helper()
	lines := make([]string, len(cases))
	for i, c := range cases {
		lines[i] = c.line
	}
	got := complete(t, lines)
	for i, c := range cases {
		want := c.want
		switch {
		case shell == "bash" && c.bash != nil:
			want = c.bash
		case shell == "zsh" && c.zsh != nil:
			want = c.zsh
		case shell == "fish" && c.fish != nil:
			want = c.fish
		}
		want = join(want)
		if !slices.Equal(got[i], want) {
			t.Errorf("%s: %q\n got: %q\nwant: %q", shell, c.line, got[i], want)
		}
	}
}

func TestBashCompletion(t *testing.T) {
	t.Parallel()
	checkCases(t, "bash", bashCompleter(true), completionCases)
}

// Without the bash-completion library (sourced by hand), the script still
// works, except for the ':'-splitting that only the library repairs.
func TestBashCompletionStandalone(t *testing.T) {
	t.Parallel()
	var cases []completionCase
	for _, c := range completionCases {
		if !strings.ContainsAny(c.line, ":=") {
			cases = append(cases, c)
		}
	}
	if len(cases) < 20 {
		t.Fatalf("only %d cases without ':' or '='", len(cases))
	}
	checkCases(t, "bash", bashCompleter(false), cases)
}

func TestZshCompletion(t *testing.T) {
	t.Parallel()
	checkCases(t, "zsh", zshCompleter, completionCases)
}

func TestFishCompletion(t *testing.T) {
	t.Parallel()
	checkCases(t, "fish", fishCompleter, completionCases)
}

// TestZshLoads loads _ipvsadm the way zsh does on a Debian system: from
// fpath, through compinit, and checks that it is registered for all three
// commands and that its definition parses.
func TestZshLoads(t *testing.T) {
	t.Parallel()
	hosttool.Require(t, "zsh", "zsh")
	out := run(t, os.Getenv("PATH"), "zsh", "-f", "-c", `
		fpath=(zsh $fpath)
		autoload -U compinit && compinit -u -D || exit 1
		print -r -- $_comps[ipvsadm] $_comps[ipvsadm-save] $_comps[ipvsadm-restore]
		autoload +X _ipvsadm || exit 1
		source zsh/_ipvsadm 2>/dev/null
		(( $+functions[_ipvsadm_existing_services] )) && print defined`)
	if want := "_ipvsadm _ipvsadm _ipvsadm\ndefined\n"; out != want {
		t.Fatalf("zsh load check printed %q, want %q", out, want)
	}
}

// TestFishLoads sources each fish script in a fresh fish and expects no
// output at all.
func TestFishLoads(t *testing.T) {
	t.Parallel()
	hosttool.Require(t, "fish", "fish")
	for _, f := range []string{"fish/ipvsadm.fish", "fish/ipvsadm-save.fish", "fish/ipvsadm-restore.fish"} {
		if out := run(t, os.Getenv("PATH"), "fish", "-N", "-c", "source "+f); out != "" {
			t.Errorf("sourcing %s printed %q", f, out)
		}
	}
}

// TestBashLoads sources the script in a plain bash and checks what it
// registers.
func TestBashLoads(t *testing.T) {
	t.Parallel()
	out := run(t, os.Getenv("PATH"), "bash", "--norc", "--noprofile", "-c", "source bash/ipvsadm && complete -p ipvsadm ipvsadm-save ipvsadm-restore")
	want := "complete -F _ipvsadm ipvsadm\ncomplete -F _ipvsadm_save ipvsadm-save\ncomplete -F _ipvsadm_restore ipvsadm-restore\n"
	if out != want {
		t.Fatalf("registered completions:\n%s\nwant:\n%s", out, want)
	}
}
