package rules_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
	"github.com/lvskit/lvskit/save"
)

// keepOpen hands a fake to ipvsadm.Main, which closes its client.
type keepOpen struct{ *ipvstest.Fake }

func (keepOpen) Close() error { return nil }

// genRules writes a random rule set as ipvsadm -S would, drawn from a small
// universe of services and real servers so that two sets overlap: equal
// entries, edits of every field, adds and deletes all occur.
func genRules(rng *rand.Rand) string {
	type svcDef struct {
		designator string
		v6, udp    bool
		fwmark     bool
	}
	universe := []svcDef{
		{"-t 10.0.0.1:80", false, false, false},
		{"-t 10.0.0.1:443", false, false, false},
		{"-u 10.0.0.1:80", false, true, false}, // the same address and port as TCP's
		{"-u [2001:db8::1]:80", true, true, false},
		{"-u 10.0.0.2:53", false, true, false},
		{"-t 10.0.0.2:80", false, false, false},
		{"-t [2001:db8::1]:80", true, false, false},
		{"-f 1", false, false, true},
		{"-f 2 -6", true, false, true},
		{"--sctp-service 10.0.0.3:9", false, false, false},
	}
	scheds := []string{"rr", "wrr", "wlc", "mh", "sh", "lc"}
	var b strings.Builder
	for _, s := range universe {
		if rng.IntN(4) == 0 {
			continue
		}
		sched := scheds[rng.IntN(len(scheds))]
		fmt.Fprintf(&b, "-A %s -s %s", s.designator, sched)
		if rng.IntN(4) == 0 {
			fmt.Fprintf(&b, " -p %d", 60+rng.IntN(4)*60)
			if rng.IntN(2) == 0 {
				if s.v6 {
					b.WriteString(" -M 64")
				} else {
					b.WriteString(" -M 255.255.255.0")
				}
			}
		}
		if (s.udp || s.fwmark) && rng.IntN(4) == 0 {
			b.WriteString(" -o")
		}
		switch {
		case sched == "mh" && rng.IntN(2) == 0:
			b.WriteString([]string{" -b mh-fallback", " -b mh-port", " -b mh-fallback,mh-port"}[rng.IntN(3)])
		case sched == "sh" && rng.IntN(2) == 0:
			b.WriteString(" -b sh-port")
		case rng.IntN(10) == 0:
			b.WriteString(" -b flag-1")
		}
		b.WriteString("\n")
		for i := range 8 {
			if rng.IntN(2) == 0 {
				continue
			}
			rs := fmt.Sprintf("192.168.1.%d:%d", 1+i, []int{80, 8080}[i%2])
			if s.v6 {
				rs = fmt.Sprintf("[2001:db8:1::%d]:80", 1+i)
			}
			method := []string{"-m", "-g", "-i"}[rng.IntN(3)]
			fmt.Fprintf(&b, "-a %s -r %s %s -w %d", s.designator, rs, method, rng.IntN(6))
			if rng.IntN(5) == 0 {
				u := 1 + rng.IntN(100)
				fmt.Fprintf(&b, " -x %d -y %d", u, rng.IntN(u+1))
			}
			if method == "-i" {
				switch rng.IntN(3) {
				case 1:
					b.WriteString(" --tun-type gue --tun-port 6080 --tun-csum")
				case 2:
					b.WriteString(" --tun-type gre --tun-nocsum")
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// loadShuffled puts a rule set into c with destinations added in a random
// order (as a director's history might have) and a few weights at 0 (an
// interrupted drain); with a fake it also sets random connection counts.
func loadShuffled(t *testing.T, rng *rand.Rand, c ipvs.Client, text string) {
	t.Helper()
	set, err := desired.ReadText("kernel", []byte(text), nil)
	if err != nil {
		t.Fatalf("generated kernel rules do not read: %v\n%s", err, text)
	}
	for _, s := range set.Services {
		svc := s.Service
		if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &svc}); err != nil {
			t.Fatalf("loading %v: %v", svc, err)
		}
		ds := slices.Clone(s.Dests)
		rng.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		for _, d := range ds {
			dest := d.Destination
			if rng.IntN(8) == 0 {
				dest.Weight = 0
			}
			if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &svc, Dest: &dest}); err != nil {
				t.Fatalf("loading %v %v: %v", svc, dest, err)
			}
			if f, ok := c.(*ipvstest.Fake); ok && rng.IntN(4) == 0 {
				n := ipvs.DestCounters{ActiveConns: uint32(rng.IntN(3)), InactConns: uint32(rng.IntN(3))}
				if err := f.SetDestinationCounters(svc, dest, n); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// savedAs is the table of c as ipvsadm -S -n writes it.
func savedAs(t *testing.T, c ipvs.Client) string {
	t.Helper()
	var b strings.Builder
	if err := save.Write(&b, c, list.Options{Numeric: true}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// restoredByIpvsadm is text as ipvsadm -R puts it into a fresh kernel, saved.
func restoredByIpvsadm(t *testing.T, text string) string {
	t.Helper()
	f := ipvstest.New()
	var out, errb strings.Builder
	env := ipvsadm.Env{Open: func() (ipvs.Client, error) { return keepOpen{f}, nil }}
	if st := ipvsadm.Main([]string{"ipvsadm", "-R"}, strings.NewReader(text), &out, &errb, env); st != 0 {
		t.Fatalf("ipvsadm -R of the desired rules: status %d, %s\n%s", st, errb.String(), text)
	}
	return savedAs(t, f)
}

// fakeClock is a clock whose Sleep moves time on at once.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.t = c.t.Add(d)
	return ctx.Err()
}

// TestApplyPropertyOnFake: for 2,000 random (kernel table, desired file)
// pairs, after Converge the fake saves exactly what ipvsadm -R of the
// desired file saves, a second plan is empty, and every mh service lists
// its destinations in canonical order. Half the pairs drain (with counts
// that end by timeout or at once), half delete at once.
func TestApplyPropertyOnFake(t *testing.T) {
	const pairs = 2000
	rng := rand.New(rand.NewPCG(11, 2026))
	counts := map[rules.Action]int{}
	for i := range pairs {
		kernelText, desiredText := genRules(rng), genRules(rng)
		f := ipvstest.New()
		loadShuffled(t, rng, f, kernelText)
		want, err := desired.ReadText("desired", []byte(desiredText), nil)
		if err != nil {
			t.Fatalf("pair %d: desired rules do not read: %v\n%s", i, err, desiredText)
		}
		// The streaming plan (one service's destinations at a time)
		// equals the plan from the whole table read first.
		cur, err := rules.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		streamed, err := rules.DiffKernel(f, want, rules.DiffOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if whole := rules.Diff(cur, want, rules.DiffOptions{}); !reflect.DeepEqual(streamed, whole) {
			t.Fatalf("pair %d: DiffKernel planned\n%+v\nDiff of the table read planned\n%+v", i, streamed.Changes, whole.Changes)
		}
		clock := &fakeClock{t: time.Unix(1e9, 0)}
		a := &rules.Applier{Client: f, Now: clock.Now, Sleep: clock.Sleep}
		if i%2 == 0 {
			a.DrainTimeout = 2 * time.Second
		}
		res, err := a.Converge(context.Background(), want, rules.DiffOptions{}, nil)
		if err != nil {
			t.Fatalf("pair %d: %v", i, err)
		}
		for k, n := range res.Plan.Count() {
			counts[k] += n
		}
		if len(res.Failed) > 0 || !res.Converged() || res.Drain != nil && len(res.Drain.Failed) > 0 {
			t.Fatalf("pair %d: failed %v, remaining %+v, drain %+v\nkernel:\n%s\ndesired:\n%s", i, res.Failed, res.Remaining, res.Drain, kernelText, desiredText)
		}
		if got, wantText := savedAs(t, f), restoredByIpvsadm(t, desiredText); got != wantText {
			t.Fatalf("pair %d: after apply, -Sn gives\n%s\nipvsadm -R of the desired file gives\n%s\nkernel was:\n%s", i, got, wantText, kernelText)
		}
		cur, err = rules.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		if p := rules.Diff(cur, want, rules.DiffOptions{}); !p.InSync() {
			t.Fatalf("pair %d: second plan not empty: %+v", i, p.Changes)
		}
		for _, s := range cur.Services {
			if s.Scheduler != "mh" {
				continue
			}
			if !slices.IsSortedFunc(s.Dests, func(a, b rules.Dest) int {
				return rules.DestKeyOf(&a.Destination).Compare(rules.DestKeyOf(&b.Destination))
			}) {
				t.Fatalf("pair %d: mh service %v lists its destinations out of canonical order: %v", i, rules.KeyOf(&s.Service), s.Dests)
			}
		}
	}
	// The pairs must exercise every kind of change.
	for _, a := range []rules.Action{rules.AddService, rules.AddDest, rules.ReAddDest, rules.EditService, rules.EditDest, rules.DeleteDest, rules.DeleteService} {
		if counts[a] == 0 {
			t.Errorf("no %s in %d pairs: the generator misses a case", a, pairs)
		}
	}
	t.Logf("%d pairs; changes planned: %v", pairs, counts)
}
