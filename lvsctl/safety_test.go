package lvsctl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/rules"
)

// saveOf is the fake's table as rules text, for before/after comparisons.
func saveOf(t *testing.T, f *ipvstest.Fake) string {
	t.Helper()
	set, err := rules.Read(keepOpen{f})
	if err != nil {
		t.Fatal(err)
	}
	set.Sort()
	var b strings.Builder
	for _, s := range set.Services {
		b.WriteString(rules.KeyOf(&s.Service).String() + " " + s.Scheduler + "\n")
		for _, d := range s.Dests {
			b.WriteString("  " + rules.DestKeyOf(&d.Destination).String() + " " + rules.MethodName(d.FwdMethod) + "\n")
		}
	}
	return b.String()
}

// TestRulesTheKernelRefusesAreRefusedFirst: a scheduler or persistence
// engine without a module, thresholds the kernel refuses and a
// non-unicast address make plan and apply exit 2 with
// the line, before anything is changed, even where other services leave.
func TestRulesTheKernelRefusesAreRefusedFirst(t *testing.T) {
	for _, tc := range []struct{ rules, want string }{
		{"-A -t 10.1.1.1:8080 -s lcx\n-a -t 10.1.1.1:8080 -r 192.168.1.9:8080 -m\n",
			`<stdin>:1: scheduler "lcx": this kernel has no module ip_vs_lcx (Scheduler or persistence engine not found)`},
		{"-A -t 10.0.0.1:80 -s wrrr\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 3\n",
			`<stdin>:1: scheduler "wrrr": this kernel has no module ip_vs_wrrr`},
		{"-A -u 10.1.1.1:5060 -s rr -p 60 --pe nosuch\n",
			`<stdin>:1: persistence engine "nosuch": this kernel has no module ip_vs_pe_nosuch`},
		{"-A -t 10.0.0.1:80 -s wrr\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 3 -y 5\n",
			`<stdin>:2: real server 192.168.1.1:80: lower threshold 5 is above the upper threshold 0`},
		{"-A -t 10.0.0.1:80 -s wrr\n-a -t 10.0.0.1:80 -r 255.255.255.255:80 -m\n",
			`<stdin>:2: real server 255.255.255.255:80: not a unicast address`},
		{`{"version": 1, "services": [{"protocol": "tcp", "address": "10.0.0.1", "port": 80, "scheduler": "lcx", "destinations": []}]}`,
			`<stdin>:1: scheduler "lcx"`},
	} {
		f, env := seeded(t)
		before := saveOf(t, f)
		for _, cmd := range [][]string{{"plan", "-"}, {"apply", "-"}, {"apply", "--drain-timeout", "0", "-"}} {
			r := run(t, env, tc.rules, cmd...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "nothing was changed") || r.stdout != "" {
				t.Errorf("%s of %q: %+v; want status 2 and %q", cmd[0], tc.rules, r, tc.want)
			}
		}
		if after := saveOf(t, f); after != before {
			t.Errorf("%q changed the table:\n%s\nto\n%s", tc.rules, before, after)
		}
	}
}

// TestKernelRefusalMidPlanRemovesNothing: when the kernel refuses an add
// after other adds were made, apply makes no drain and no delete, reports
// what it made, refused and held back, and exits 1; the table keeps every
// service and real server it had.
func TestKernelRefusalMidPlanRemovesNothing(t *testing.T) {
	for _, timeout := range []string{"0", "5m"} {
		f, env := seeded(t)
		// The file keeps 10.0.0.1:80 with one server fewer, drops the
		// other two services, and adds two services; the kernel refuses
		// the second add (a module missing at the last moment).
		file := "-A -t 10.0.0.1:80 -s wrr\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 3\n" +
			"-A -t 10.1.1.1:443 -s rr\n-a -t 10.1.1.1:443 -r 192.168.2.1:443 -m\n" +
			"-A -t 10.1.1.1:8080 -s rr\n-a -t 10.1.1.1:8080 -r 192.168.2.1:8080 -m\n"
		before := saveOf(t, f)
		f.FailNth(ipvs.CmdNewService, 2, unix.ENOENT)
		r := run(t, env, file, "apply", "--max-delete", "100", "--drain-timeout", timeout, "-")
		if r.code != exitFailed {
			t.Fatalf("timeout %s: status %d; want 1: %+v", timeout, r.code, r)
		}
		for _, want := range []string{
			"add-service -t 10.1.1.1:8080: FAILED: ipvs NEW_SERVICE: no such file or directory",
			"stopped: the kernel refused 2 changes; 2 other changes were made",
			"  refused: add-service -t 10.1.1.1:8080: ipvs NEW_SERVICE: no such file or directory",
			"  refused: add-dest -t 10.1.1.1:8080 -r 192.168.2.1:8080: ipvs NEW_DEST: no such process",
			"nothing was drained or deleted: 3 removals held back:",
			"  held: delete-dest -t 10.0.0.1:80 -r 192.168.1.2:80",
			"  held: delete-service -u 10.0.0.2:53",
			"  held: delete-service -f 7 -6",
		} {
			if !strings.Contains(r.stdout, want+"\n") {
				t.Errorf("timeout %s: output lacks %q:\n%s", timeout, want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "planned again") || strings.Contains(r.stdout, "drain-start") || strings.Contains(r.stdout, "delete-") && !strings.Contains(r.stdout, "held: delete-") {
			t.Errorf("timeout %s: a race reported, or a drain or delete made:\n%s", timeout, r.stdout)
		}
		after := saveOf(t, f)
		for _, line := range strings.Split(strings.TrimSpace(before), "\n") {
			if !strings.Contains(after, line+"\n") {
				t.Errorf("timeout %s: the table lost %q:\n%s", timeout, line, after)
			}
		}
		if !strings.Contains(after, "-t 10.1.1.1:443 rr\n") {
			t.Errorf("timeout %s: the add made before the refusal is missing:\n%s", timeout, after)
		}
		if s := run(t, env, "", "status"); s.code != exitOK {
			t.Errorf("timeout %s: status after a stopped apply: %+v", timeout, s)
		}
	}
}

// TestEmptyFileIsRefused: a file without services is what a failed write
// leaves; plan and apply refuse it unless --allow-empty.
func TestEmptyFileIsRefused(t *testing.T) {
	for _, file := range []string{"", "# ipvsadm.rules\n", `{"version": 1, "services": []}`} {
		f, env := seeded(t)
		before := saveOf(t, f)
		for _, cmd := range []string{"plan", "apply"} {
			r := run(t, env, file, cmd, "-")
			if r.code != exitUsage || !strings.Contains(r.stderr, "<stdin> holds no service") || !strings.Contains(r.stderr, "--allow-empty") {
				t.Errorf("%s of %q: %+v", cmd, file, r)
			}
		}
		if saveOf(t, f) != before {
			t.Fatalf("%q changed the table", file)
		}
		if r := run(t, env, file, "apply", "--allow-empty", "--max-delete", "100", "--drain-timeout", "0", "-"); r.code != exitOK || saveOf(t, f) != "" {
			t.Errorf("apply --allow-empty of %q: %+v, table %q", file, r, saveOf(t, f))
		}
	}
}

// TestMaxDelete: a plan that takes out more than --max-delete percent of
// the real servers is shown by plan, then refused by both.
func TestMaxDelete(t *testing.T) {
	f, env := seeded(t)
	before := saveOf(t, f)
	// Keeps 1 of the table's 5 real servers: 4 of 5 (80 %) leave.
	file := "-A -t 10.0.0.1:80 -s wrr\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 3\n"
	p := run(t, env, file, "plan", "-")
	if p.code != exitUsage || !strings.Contains(p.stdout, "delete-service") ||
		!strings.Contains(p.stderr, "the plan takes out 4 of the kernel's 5 real servers (80%), more than --max-delete 50%") {
		t.Errorf("plan: %+v", p)
	}
	a := run(t, env, file, "apply", "-")
	if a.code != exitUsage || !strings.Contains(a.stderr, "more than --max-delete 50%; nothing was changed") || saveOf(t, f) != before {
		t.Errorf("apply: %+v", a)
	}
	if r := run(t, env, file, "plan", "--max-delete", "80", "-"); r.code != exitChanges {
		t.Errorf("plan --max-delete 80: %+v", r)
	}
	if r := run(t, env, file, "apply", "--max-delete", "80", "--drain-timeout", "0", "-"); r.code != exitOK {
		t.Errorf("apply --max-delete 80: %+v", r)
	}
}

// TestMachineOutputIsOneSchema: plan, apply and status --json name
// services and real servers as ipvsadm writes them, with the same field
// names, and apply --json reports what it did.
func TestMachineOutputIsOneSchema(t *testing.T) {
	f, env := seeded(t)
	svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoUDP, Addr: mustAddr("10.0.0.2"), Port: 53}
	leaving := ipvs.Destination{Family: ipvs.AFInet, Addr: mustAddr("192.168.1.4"), Port: 53}
	if err := f.SetDestinationCounters(svc, leaving, ipvs.DestCounters{ActiveConns: 2}); err != nil {
		t.Fatal(err)
	}
	file := strings.Replace(seedRules, "-a -u 10.0.0.2:53 -r 192.168.1.4:53 -g -w 1\n", "", 1)
	file = strings.Replace(file, "-m -w 3", "-m -w 4", 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the "signal": the drain starts, then the apply ends
	env.Context = ctx
	a := run(t, env, file, "apply", "--json", "-")
	env.Context = context.Background()
	var doc map[string]any
	if err := json.Unmarshal([]byte(a.stdout), &doc); err != nil || a.code != exitInterrupted {
		t.Fatalf("apply --json: %v, %+v", err, a)
	}
	if doc["result"] != "interrupted" {
		t.Errorf("result %v", doc["result"])
	}
	applied := doc["applied"].([]any)
	if len(applied) == 0 || applied[0].(map[string]any)["service"] != "-t 10.0.0.1:80" {
		t.Errorf("applied %v", applied)
	}
	pending := doc["drains"].(map[string]any)["pending"].([]any)
	s := run(t, env, "", "status", "--json")
	var st map[string]any
	if err := json.Unmarshal([]byte(s.stdout), &st); err != nil {
		t.Fatal(err)
	}
	p := run(t, env, file, "plan", "--json", "-")
	var pl map[string]any
	if err := json.Unmarshal([]byte(p.stdout), &pl); err != nil {
		t.Fatal(err)
	}
	for name, drains := range map[string]any{"apply": pending, "status": st["pending_drains"], "plan": pl["pending_drains"]} {
		list, _ := drains.([]any)
		if len(list) != 1 {
			t.Fatalf("%s: pending drains %v", name, drains)
		}
		d := list[0].(map[string]any)
		if d["service"] != "-u 10.0.0.2:53" || d["destination"] != "192.168.1.4:53" || d["weight_before"] != 1.0 {
			t.Errorf("%s: drain %v", name, d)
		}
		for k := range d {
			if k != strings.ToLower(k) || strings.Contains(k, "-") {
				t.Errorf("%s: field %q is not snake_case", name, k)
			}
		}
	}
}

// TestHelpHelps: every command's help ends with examples, lists only the
// flags it takes, and shows each default once.
func TestHelpHelps(t *testing.T) {
	env := testEnv(t, ipvstest.New())
	for _, cmd := range []string{"", "list", "plan", "apply", "status"} {
		args := strings.Fields(cmd + " --help")
		r := run(t, env, "", args...)
		if r.code != exitOK || !strings.Contains(r.stdout, "\nExamples:\n  lvsctl "+cmd) {
			t.Errorf("lvsctl %s --help has no examples: %+v", cmd, r)
		}
		if (cmd == "list" || cmd == "") && strings.Contains(r.stdout, "--journal-dir") {
			t.Errorf("lvsctl %s --help lists --journal-dir", cmd)
		}
		if cmd == "status" && (strings.Contains(r.stdout, "--dry-run") || strings.Contains(r.stdout, "--drain-timeout")) {
			t.Errorf("status --help lists apply's flags:\n%s", r.stdout)
		}
		if strings.Count(r.stdout, "5m") > 1 && cmd != "apply" {
			t.Errorf("lvsctl %s --help shows the drain default twice:\n%s", cmd, r.stdout)
		}
	}
	r := run(t, env, "", "apply", "--bogus")
	if r.code != exitUsage || !strings.Contains(r.stderr, "see lvsctl apply --help") {
		t.Errorf("a bad flag does not point at the command's help: %+v", r)
	}
}

// TestNotRootSaysSo: a kernel answering EPERM is reported as a matter of
// privilege.
func TestNotRootSaysSo(t *testing.T) {
	env := testEnv(t, ipvstest.New())
	env.Open = func() (ipvs.Client, error) { return nil, &ipvs.OpError{Op: ipvs.CmdGetInfo, Err: unix.EPERM} }
	r := run(t, env, "", "list")
	if r.code != exitFailed || !strings.Contains(r.stderr, "you must be root") || strings.Contains(r.stderr, "module") {
		t.Errorf("list as non-root: %+v", r)
	}
}
