//go:build lab

package rules_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lab/labtest"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// TestApplyPropertyOnKernel is TestApplyPropertyOnFake on the lab's
// kernel, judged by Debian's ipvsadm: for 200 random (kernel table,
// desired file) pairs, after Converge Debian's ipvsadm -Sn prints exactly
// what it prints after its own ipvsadm -C; ipvsadm -R of the desired file,
// a second plan is empty, and mh services list their real servers in
// canonical order.
func TestApplyPropertyOnKernel(t *testing.T) {
	labtest.Netns(t)
	c, err := ipvs.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const pairs = 200
	rng := rand.New(rand.NewPCG(12, 2026))
	counts := map[rules.Action]int{}
	for i := range pairs {
		kernelText, desiredText := genRules(rng), genRules(rng)
		if r := labtest.Run(t, "", labtest.RefIpvsadm, "-C"); r.Code != 0 {
			t.Fatalf("ipvsadm -C: %+v", r)
		}
		loadShuffled(t, rng, c, kernelText)
		want, err := desired.ReadText("desired", []byte(desiredText), nil)
		if err != nil {
			t.Fatalf("pair %d: %v", i, err)
		}
		a := &rules.Applier{Client: c}
		if i%2 == 0 {
			// No traffic: every drain ends at its first poll.
			a.DrainTimeout, a.PollInterval = 10*time.Second, 10*time.Millisecond
		}
		res, err := a.Converge(context.Background(), want, rules.DiffOptions{}, nil)
		if err != nil {
			t.Fatalf("pair %d: %v", i, err)
		}
		for k, n := range res.Plan.Count() {
			counts[k] += n
		}
		if len(res.Failed) > 0 || !res.Converged() || res.Drain != nil && (len(res.Drain.Failed) > 0 || res.Drain.TimedOut > 0) {
			t.Fatalf("pair %d: failed %v, remaining %+v, drain %+v\nkernel:\n%s\ndesired:\n%s", i, res.Failed, res.Remaining, res.Drain, kernelText, desiredText)
		}
		got := labtest.Run(t, "", labtest.RefIpvsadm, "-Sn")
		cur, err := rules.Read(c)
		if err != nil {
			t.Fatal(err)
		}
		if p := rules.Diff(cur, want, rules.DiffOptions{}); !p.InSync() {
			t.Fatalf("pair %d: second plan not empty: %+v", i, p.Changes)
		}
		for _, s := range cur.Services {
			if s.Scheduler == "mh" && !slices.IsSortedFunc(s.Dests, func(a, b rules.Dest) int {
				return rules.DestKeyOf(&a.Destination).Compare(rules.DestKeyOf(&b.Destination))
			}) {
				t.Fatalf("pair %d: mh service %v lists its real servers out of canonical order", i, rules.KeyOf(&s.Service))
			}
		}
		labtest.Run(t, "", labtest.RefIpvsadm, "-C")
		if r := labtest.Run(t, desiredText, labtest.RefIpvsadm, "-R"); r.Code != 0 {
			t.Fatalf("pair %d: Debian's ipvsadm -R of the desired file: %+v", i, r)
		}
		wantSave := labtest.Run(t, "", labtest.RefIpvsadm, "-Sn")
		if got.Stdout != wantSave.Stdout || got.Code != 0 {
			t.Fatalf("pair %d: after apply ipvsadm -Sn gives\n%s\nafter ipvsadm -C; ipvsadm -R of the file:\n%s\nkernel was:\n%s", i, got.Stdout, wantSave.Stdout, kernelText)
		}
	}
	t.Logf("%d pairs on the kernel; changes planned: %v", pairs, counts)
}
