// Package lvsctl is the lvsctl command.
//
// It lists a director's IPVS table for people and programs, and plans the
// changes that turn it into a desired rule set (ipvsadm-save text, or
// lvsctl's JSON or YAML). It applies them without a flush: new services and
// servers first, then edits, then a drain of each leaving server. A drained
// server has weight 0 and is deleted when its connections are gone or at a
// deadline. Drains are recorded in a journal, so the next apply finishes an
// interrupted drain and status shows it. The engine is package rules; lvsctl
// run is package run, and the journal and run's record are package record.
// This package is the command line, the output and the host (the journal
// directory, the connection table, signals).
package lvsctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/internal/kmod"
	"github.com/lvskit/lvskit/internal/kongmsg"
	"github.com/lvskit/lvskit/internal/netnsid"
	"github.com/lvskit/lvskit/internal/version"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lvsctl/internal/cliutil"
	"github.com/lvskit/lvskit/lvsctl/record"
	lvsrun "github.com/lvskit/lvskit/lvsctl/run"
	"github.com/lvskit/lvskit/names"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// Exit statuses, decided only in Main.
const (
	exitOK          = 0 // done; for plan: nothing to change
	exitFailed      = 1 // an error, or an apply that did not converge
	exitUsage       = 2 // bad command line or bad rules file: nothing was changed
	exitChanges     = 3 // plan (and apply --dry-run): the kernel differs from the file
	exitInterrupted = 4 // apply stopped by SIGINT/SIGTERM; the journal holds the drains left
)

// lvsctl status's exit statuses, as monitoring plugins use them.
const (
	statusOK       = 0 // every checked real server in service, nothing pending
	statusWarning  = 1 // a real server held out or draining, a refused reload, late probes, a stopped run
	statusCritical = 2 // a service whose real servers all failed their checks
	statusUnknown  = 3 // the journal or the record could not be read
)

const description = "Plan and apply a desired IPVS rule set on a live director without dropping connections.\n\n" +
	"FILE is ipvsadm-save text (as in /etc/ipvsadm.rules), the JSON 'lvsctl list --json' prints, or the same document in YAML; '-' reads stdin. " +
	"apply never flushes: it adds, edits, then drains leaving real servers (weight 0, deleted when their " +
	"connections end or at --drain-timeout), with a journal so an interrupted drain is finished by the next apply."

// statusHelp is status's line in the command list; statusExits ends its
// --help. Its exit statuses are a monitoring plugin's (Nagios OK, WARNING,
// CRITICAL, UNKNOWN).
const (
	statusHelp = "Show lvsctl run's health record and the drains pending " +
		"(exit 0: all in service, 1: some out or draining, 2: a service with every real server failed)."
	statusExits = "Exit status, as a monitoring plugin's:\n" +
		"  0  every checked real server in service and no drain pending\n" +
		"  1  a real server held out or draining, a drain pending, a refused reload,\n" +
		"     probes late, or a record whose run has stopped\n" +
		"  2  a service whose real servers all failed (ALL REAL SERVERS ... FAILED)\n" +
		"  3  the record or the journal could not be read, or a bad command line"
)

// defaultJournalRoot holds one journal directory per network namespace
// (see record.DefaultRoot).
const defaultJournalRoot = record.DefaultRoot

// Env is what Run needs from the host.
type Env struct {
	// Open connects to the kernel's IPVS (a fake in tests).
	Open func() (ipvs.Client, error)
	// JournalRoot and JournalDir locate the journal (record.DefaultRoot
	// and this namespace's directory below it when empty).
	JournalRoot, JournalDir string
	// ConnFile is the kernel's connection table; "" means /proc/net/ip_vs_conn.
	ConnFile string
	// Sysctl reads a net.ipv4.vs sysctl ("expire_quiescent_template"); nil
	// reads /proc/sys/net/ipv4/vs.
	Sysctl func(name string) (string, error)
	// Terminal selects the live progress display instead of one line per
	// event.
	Terminal bool
	// Resolver answers names in rules text; nil means the system's files.
	Resolver *names.Resolver
	// Modules says whether the kernel has or can load a module (the
	// schedulers and persistence engines a file names); nil reads the
	// running kernel's module tree.
	Modules rules.HasModule
	// Context ends an apply's drain and a run (the main ends it on SIGINT
	// and SIGTERM).
	Context context.Context
	Now     func() time.Time
	// Reload delivers SIGHUP to a run: it reads its files again.
	Reload <-chan os.Signal
	// Probe runs a run's health probes (nil: health.Probe).
	Probe func(ctx context.Context, t health.Target) error
	// Notify tells the service manager a run's state (nil: sd_notify when
	// $NOTIFY_SOCKET is set); Watchdog overrides $WATCHDOG_USEC.
	Notify   func(state string)
	Watchdog time.Duration
	// Announce opens the device a run announces its prefixes on (nil:
	// package announce's).
	Announce func(device string) (lvsrun.Announcer, error)
	// Sleep waits between the reads of withdraw and announce (nil:
	// time.Sleep).
	Sleep func(time.Duration)
}

type cli struct {
	Version kong.VersionFlag `help:"Print the version and exit."`

	List     listCmd     `cmd:"" help:"List the kernel's services and real servers."`
	Plan     planCmd     `cmd:"" help:"Show the changes that would turn the kernel's table into FILE (exit 0: in sync, 3: changes)."`
	Apply    applyCmd    `cmd:"" help:"Make the kernel's table equal FILE: add, edit, then drain and delete what leaves."`
	Status   statusCmd   `cmd:"" help:"${status_help}"`
	Run      runCmd      `cmd:"" help:"Apply FILE, then keep the table as FILE says with health checks: failed real servers out, recovered ones back."`
	Top      topCmd      `cmd:"" help:"Live view of the table: rates, connections, weights and each real server's state (draining, held out by its check)."`
	Import   importCmd   `cmd:"" help:"Convert another tool's configuration into a desired state with checks (YAML on stdout)."`
	Withdraw withdrawCmd `cmd:"" help:"Stop announcing this director's VIPs (all, or those named) for maintenance; the table keeps serving."`
	Announce announceCmd `cmd:"" help:"Announce VIPs that lvsctl withdraw took back (all, or those named)."`
}

type listCmd struct {
	JSON  bool `name:"json" help:"Print the JSON document apply reads (/usr/share/doc/lvskit/lvsctl.md)."`
	Stats bool `name:"stats" help:"Add the 64-bit counters."`
	Rate  bool `name:"rate" help:"Add the estimated rates."`
}

// journalFlag locates the journal, for the commands that read or keep it.
type journalFlag struct {
	JournalDir string `name:"journal-dir" env:"LVSCTL_JOURNAL_DIR" placeholder:"DIR" help:"Journal directory (default: /run/lvsctl, one directory per network namespace)."`
}

type planFlags struct {
	File         string        `arg:"" name:"FILE" help:"Desired rules: ipvsadm-save text, or lvsctl JSON or YAML; - for stdin."`
	JSON         bool          `name:"json" help:"Print the plan (apply: what was done) as JSON."`
	DrainTimeout time.Duration `name:"drain-timeout" default:"${drain_timeout}" help:"Longest drain of a leaving real server before it is deleted with connections left; 0 deletes at once."`
	KeepMHOrder  bool          `name:"keep-mh-order" help:"Leave mh services' real servers in the kernel's order instead of re-adding them in canonical order."`
	cliutil.GuardFlags
	journalFlag
}

type planCmd struct {
	planFlags
}

type applyCmd struct {
	planFlags
	DryRun bool `name:"dry-run" short:"n" help:"Print the plan and change nothing (same output and status as plan)."`
}

type statusCmd struct {
	JSON bool `name:"json" help:"Print the journal as JSON."`
	journalFlag
}

// examples end each command's help.
var examples = map[string][]string{
	"": {
		"lvsctl list                           # the table, one row per real server",
		"lvsctl plan /etc/ipvsadm.rules        # what apply would change; exit 3 if anything",
		"lvsctl apply /etc/ipvsadm.rules       # change it, draining real servers that leave",
	},
	"list": {
		"lvsctl list --stats --rate",
		"lvsctl list --json > rules.json       # the desired-state document apply reads",
	},
	"plan": {
		"lvsctl plan /etc/ipvsadm.rules",
		"ipvsadm-save -n | lvsctl plan -       # always in sync: a check of the tools",
		"lvsctl plan --json rules.json | jq '.changes[].action'",
	},
	"apply": {
		"lvsctl apply /etc/ipvsadm.rules                    # drains for up to 5 minutes",
		"lvsctl apply --drain-timeout 30s rules.json",
		"lvsctl apply --max-delete 100 new-pool.rules       # replacing most real servers on purpose",
	},
	"status": {
		"lvsctl status",
		"lvsctl status --json",
	},
	"run": {
		"lvsctl run /etc/lvsctl/director.yaml                   # YAML with checks; SIGHUP reloads it",
		"lvsctl run --checks /etc/lvsctl/checks.yaml /etc/ipvsadm.rules",
		"lvsctl run --metrics-listen 127.0.0.1:9117 director.yaml",
	},
	"import keepalived": {
		"lvsctl import keepalived /etc/keepalived/keepalived.conf > director.yaml",
		"lvsctl import keepalived --lossy keepalived.conf > director.yaml 2> changes.txt",
	},
	"withdraw": {
		"lvsctl withdraw --wait 5m              # every VIP; wait until the router moved new connections away",
		"lvsctl withdraw 203.0.113.10           # one VIP",
	},
	"announce": {
		"lvsctl announce                        # end the withdrawal",
	},
	"top": {
		"lvsctl top                              # full screen; ? lists the keys",
		"lvsctl top --sort cps --filter 10.0.0.1",
		"lvsctl top -b -n 3 -d 2s                # three plain-text frames, 2 s apart",
		"lvsctl top --json -n 1 | jq '.services[].destinations[].state'",
	},
}

// printHelp is kong's help followed by the command's examples.
func printHelp(options kong.HelpOptions, ctx *kong.Context) error {
	if err := kong.DefaultHelpPrinter(options, ctx); err != nil {
		return err
	}
	cmd := ""
	if node := ctx.Selected(); node != nil {
		cmd = node.Path()
	}
	if cmd == "status" {
		fmt.Fprintln(ctx.Stdout, "\n"+statusExits)
	}
	if ex := examples[cmd]; len(ex) > 0 {
		fmt.Fprintln(ctx.Stdout, "\nExamples:")
		for _, e := range ex {
			fmt.Fprintln(ctx.Stdout, "  "+e)
		}
	}
	return nil
}

// exitRequest carries kong's exit (after --help or --version) out of the
// parser, so that Main alone returns exit statuses.
type exitRequest int

// Main runs lvsctl (args[0] is the name it was invoked as; stdin is read
// for FILE "-") and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, env Env) (code int) {
	var c cli
	parser, err := kong.New(&c,
		kong.Name("lvsctl"),
		kong.Description(description),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitRequest(code)) }),
		kong.Vars{"version": "lvsctl " + version.Version, "drain_timeout": shortDuration(rules.DefaultDrainTimeout), "status_help": statusHelp},
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Help(printHelp),
	)
	if err != nil {
		fmt.Fprintf(stderr, "lvsctl: internal error: %v\n", err)
		return exitFailed
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exitRequest)
			if !ok {
				panic(r)
			}
			code = int(e)
		}
	}()
	kctx, err := parser.Parse(args[min(1, len(args)):])
	if err != nil {
		help := helpCommand(err)
		fmt.Fprintf(stderr, "lvsctl: %s (see %s --help)\n", parseMessage(err), help)
		if help == "lvsctl status" {
			return statusUnknown // 2 would read as critical to a monitoring system
		}
		return exitUsage
	}
	if env.Context == nil {
		env.Context = context.Background()
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Modules == nil {
		env.Modules = new(kmod.Modules).Has
	}
	r := &runner{env: env, in: stdin, out: stdout, errOut: stderr}
	var status int
	cmd := kctx.Command()
	switch {
	case cmd == "list":
		status, err = r.list(&c.List)
	case strings.HasPrefix(cmd, "plan"):
		r.journalDir = c.Plan.JournalDir
		status, err = r.plan(&c.Plan.planFlags)
	case strings.HasPrefix(cmd, "apply"):
		r.journalDir = c.Apply.JournalDir
		if c.Apply.DryRun {
			status, err = r.plan(&c.Apply.planFlags)
		} else {
			status, err = r.apply(&c.Apply.planFlags)
		}
	case cmd == "status":
		r.journalDir = c.Status.JournalDir
		status, err = r.status(&c.Status)
	case cmd == "top":
		r.journalDir = c.Top.JournalDir
		status, err = r.top(&c.Top)
	case strings.HasPrefix(cmd, "run"):
		r.journalDir = c.Run.JournalDir
		status, err = r.run(&c.Run)
	case strings.HasPrefix(cmd, "withdraw"):
		r.journalDir = c.Withdraw.JournalDir
		status, err = r.withdraw(&c.Withdraw)
	case strings.HasPrefix(cmd, "announce"):
		r.journalDir = c.Announce.JournalDir
		status, err = r.announce(&c.Announce)
	case strings.HasPrefix(cmd, "import keepalived"):
		status, err = r.importKeepalived(&c.Import.Keepalived)
	default:
		err = fmt.Errorf("internal error: unknown command %q", cmd)
	}
	var ue cliutil.UsageError
	switch {
	case err == nil:
		return status
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "lvsctl: %v\n", err)
		if ue.Help {
			fmt.Fprintf(stderr, "lvsctl: see lvsctl %s --help\n", strings.Fields(cmd)[0])
		}
		return exitUsage
	default:
		fmt.Fprintf(stderr, "lvsctl: %v\n", err)
		if status == exitOK {
			status = exitFailed
		}
		return status
	}
}

// runner holds one run's streams and host.
type runner struct {
	env        Env
	in         io.Reader
	out        io.Writer
	errOut     io.Writer
	journalDir string
	// yamlCache keeps a YAML file's entries between reads of it: set by
	// lvsctl run, which reads its file again on each reload.
	yamlCache *desired.YAMLCache
}

func (r *runner) open() (ipvs.Client, error) {
	c, err := r.env.Open()
	if err != nil {
		return nil, cliutil.KernelError(err)
	}
	return c, nil
}

// shortDuration writes d without zero trailing units: "5m", not "5m0s".
func shortDuration(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"0s", "0m"} {
		if strings.HasSuffix(s, z) && len(s) > len(z) && s[len(s)-len(z)-1] >= 'a' {
			s = strings.TrimSuffix(s, z)
		}
	}
	return s
}

// helpCommand is the help to point at for a command-line error: the
// command's (its full path, "import keepalived") when kong's error has one.
func helpCommand(err error) string {
	var pe *kong.ParseError
	if errors.As(err, &pe) && pe.Context != nil {
		if node := pe.Context.Selected(); node != nil {
			return "lvsctl " + node.Path()
		}
	}
	return "lvsctl"
}

// valueKinds say what a flag takes where its placeholder does not.
var valueKinds = map[string]string{"metrics-listen": "HOST:PORT"}

// parseMessage is a command-line error's text: a flag's bad value as
// "--flag: why", kong's other errors in words (kongmsg).
func parseMessage(err error) string {
	var fe *flagError
	if errors.As(err, &fe) {
		return fe.Error()
	}
	var pe *kong.ParseError
	if errors.As(err, &pe) {
		return kongmsg.Message(err, pe.Context, valueKinds)
	}
	return kongmsg.Message(err, nil, valueKinds)
}

func (r *runner) sysctl(name string) (string, error) {
	if r.env.Sysctl != nil {
		return r.env.Sysctl(name)
	}
	b, err := os.ReadFile("/proc/sys/net/ipv4/vs/" + name)
	return strings.TrimSpace(string(b)), err
}

func (r *runner) connFile() string {
	if r.env.ConnFile != "" {
		return r.env.ConnFile
	}
	return "/proc/net/ip_vs_conn"
}

// journalPaths are the journal root and this namespace's directory below it.
func (r *runner) journalPaths() (root, dir string) {
	root = r.env.JournalRoot
	if root == "" {
		root = defaultJournalRoot
	}
	dir = r.journalDir
	if dir == "" {
		dir = r.env.JournalDir
	}
	if dir == "" {
		return root, netnsid.Dir(root)
	}
	return dir, dir
}

func (r *runner) journalPath() string {
	_, dir := r.journalPaths()
	return dir
}

// journal opens this namespace's journal directory (see record.Open).
func (r *runner) journal(lock bool) (*record.Journal, error) {
	root, dir := r.journalPaths()
	return record.Open(root, dir, lock)
}

// runState reads lvsctl run's record without locking, for plan, apply and
// status; nil when no run left one in this boot and namespace.
func (r *runner) runState() *record.Run {
	j, err := r.journal(false)
	if err != nil {
		return nil
	}
	defer j.Close()
	st, err := j.LoadRun()
	if err != nil {
		fmt.Fprintf(r.errOut, "lvsctl: warning: %v\n", err)
		return nil
	}
	return st
}
