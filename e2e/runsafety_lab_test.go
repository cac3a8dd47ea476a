//go:build lab

package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// safeDoc is the seed VS/NAT service with one check for both real
// servers, which check edits replace.
func safeDoc(check string) string {
	return `version: 2
services:
  - protocol: tcp
    address: ` + seedVIP + `
    port: 80
    scheduler: wrr
    check: ` + check + `
    destinations:
      - {address: 172.16.0.2, port: 80, method: masq, weight: 1}
      - {address: 172.16.0.3, port: 8000, method: masq, weight: 2}
`
}

// holdWeights polls the director's table every 100 ms for d and fails at
// the first poll where rs1 is not at weight w1 or rs2 not at w2.
func (n *network) holdWeights(what string, d time.Duration, w1, w2 string) {
	n.t.Helper()
	polls := 0
	for end := time.Now().Add(d); time.Now().Before(end); polls++ {
		g1, g2 := n.weightOf("dir", seedVIP80, seedRS1), n.weightOf("dir", seedVIP80, seedRS2)
		if g1 != w1 || g2 != w2 {
			n.t.Fatalf("%s: after %d polls rs1 has weight %q (want %s), rs2 %q (want %s):\n%s",
				what, polls, g1, w1, g2, w2, n.ipvsadm("dir", "-Ln"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reloadRun writes doc and sends the run SIGHUP.
func reloadRun(t *testing.T, run *bgRun, file, doc string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// TestRunReloadsKeepServing: with rs1 healthy and rs2 failing, each edit
// of the check (interval, timeout, path, expect, type, port, via) is
// reloaded while the table is polled every 100 ms for longer than the new
// check needs to decide: rs1 never leaves service and rs2 never comes
// back. A reload without real servers, or with a repeated key, is refused
// with run alive and the table as it was, and status says so (exit 1). A
// restart on an edited check keeps both as they were. Flags are checked
// before the first change.
func TestRunReloadsKeepServing(t *testing.T) {
	n := natNetwork(t, "hcsafe")
	n.start("rs1", "http", "rs1-8080", "172.16.0.2:8080")
	n.start("rs2", "http", "rs2-8080", "172.16.0.3:8080")
	journal := t.TempDir() + "/journal"
	check := "{type: http, path: /, interval: 500ms, timeout: 300ms, rise: 2, fall: 2}"
	file := writeFile(t, "director.yaml", safeDoc(check))
	run := n.lvsctlRun("dir", "--journal-dir", journal, file)
	n.waitWeight("dir", seedVIP80, seedRS1, "1", 5*time.Second)
	n.waitWeight("dir", seedVIP80, seedRS2, "2", 5*time.Second)
	n.must("rs2", "iptables", "-I", "INPUT", "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset")
	n.waitWeight("dir", seedVIP80, seedRS2, "0", 3*time.Second)

	// Long enough for any of the checks below to fail rs1 had it lost
	// its state: fall (2) × interval + timeout, and a second more.
	const decide = 2*600*time.Millisecond + 300*time.Millisecond + time.Second
	for _, edit := range []struct{ name, check string }{
		{"interval", "{type: http, path: /, interval: 600ms, timeout: 300ms, rise: 2, fall: 2}"},
		{"timeout", "{type: http, path: /, interval: 600ms, timeout: 250ms, rise: 2, fall: 2}"},
		{"path", "{type: http, path: /healthz, interval: 600ms, timeout: 250ms, rise: 2, fall: 2}"},
		{"expect", `{type: http, path: /healthz, expect: "200-299", interval: 600ms, timeout: 250ms, rise: 2, fall: 2}`},
		{"type", "{type: tcp, interval: 600ms, timeout: 250ms, rise: 2, fall: 2}"},
		{"port", "{type: tcp, port: 8080, interval: 600ms, timeout: 250ms, rise: 2, fall: 2}"},
		{"via", "{type: tcp, via: vip, interval: 600ms, timeout: 250ms, rise: 2, fall: 2}"},
		{"back", check},
	} {
		before := len(run.text())
		reloadRun(t, run, file, safeDoc(edit.check))
		n.holdWeights(edit.name+" edit", decide, "1", "0")
		if log := run.text()[before:]; !strings.Contains(log, "reloaded") {
			t.Fatalf("%s edit: the reload did not take effect:\n%s", edit.name, log)
		}
	}

	// Refused reloads: the table stays, run stays up, status says why.
	noDests := strings.SplitAfter(safeDoc(check), "    destinations:")[0] + " []\n"
	repeated := strings.Replace(safeDoc(check), "    port: 80\n", "    port: 80\n    port: 81\n", 1)
	for _, bad := range []struct{ name, doc, want string }{
		{"no real servers", noDests, "more than --max-delete 50%"},
		{"a repeated key", repeated, `"port"`},
		{"a repeated key in JSON", `{"version": 2, "services": [{"protocol": "tcp", "address": "` + seedVIP + `", "port": 80, "port": 81,
  "scheduler": "wrr", "destinations": [{"address": "172.16.0.2", "port": 80, "method": "masq", "weight": 1}]}]}
`, `"port" repeated: first on line 1`},
	} {
		before := len(run.text())
		reloadRun(t, run, file, bad.doc)
		n.holdWeights(bad.name, 2*time.Second, "1", "0")
		log := run.text()[before:]
		if !strings.Contains(log, "reload refused, the table and checks stay as they were") || !strings.Contains(log, bad.want) {
			t.Errorf("a reload with %s:\n%s\nwant it refused with %q", bad.name, log, bad.want)
		}
		st := n.run("dir", labtest.Ours("lvsctl"), "status", "--journal-dir", journal)
		if st.Code != 1 || !strings.Contains(st.Stdout, "last reload REFUSED") {
			t.Errorf("status after a reload with %s: %+v", bad.name, st)
		}
		select {
		case <-run.done:
			t.Fatalf("run ended after a reload with %s:\n%s", bad.name, run.text())
		default:
		}
	}

	// A restart on an edited check: both keep their state.
	run.cmd.Process.Kill()
	<-run.done
	if err := os.WriteFile(file, []byte(safeDoc("{type: tcp, interval: 700ms, timeout: 300ms, rise: 2, fall: 2}")), 0o600); err != nil {
		t.Fatal(err)
	}
	run = n.lvsctlRun("dir", "--journal-dir", journal, file)
	n.holdWeights("restart with an edited check", 2*700*time.Millisecond+300*time.Millisecond+time.Second, "1", "0")
	run.stop(t)

	// Bad flags change nothing, though the file adds a service.
	before := n.ipvsadm("dir", "-Sn")
	other := writeFile(t, "other.yaml", safeDoc(check)+`  - protocol: tcp
    address: `+seedVIP+`
    port: 8080
    scheduler: rr
    destinations:
      - {address: 172.16.0.2, port: 8080, method: masq, weight: 1}
`)
	// The same file with good flags would change the table: a plan says so.
	if r := n.run("dir", labtest.Ours("lvsctl"), "plan", "--journal-dir", journal, other); r.Code != 3 {
		t.Fatalf("lvsctl plan %s: %+v; want exit 3 (changes)", other, r)
	}
	for _, args := range [][]string{
		{"run", "--journal-dir", journal, "--metrics-listen", "notanaddr", other},
		{"run", "--journal-dir", journal, "--drain-timeout=-5s", other},
		{"apply", "--journal-dir", journal, "--drain-timeout=-5s", other},
		{"plan", "--journal-dir", journal, "--drain-timeout=-5s", other},
	} {
		r := n.run("dir", labtest.Ours("lvsctl"), args...)
		if r.Code != 2 || r.Stdout != "" {
			t.Errorf("lvsctl %s: %+v; want exit 2", strings.Join(args, " "), r)
		}
		if after := n.ipvsadm("dir", "-Sn"); after != before {
			t.Errorf("lvsctl %s changed the table:\n%s\nto\n%s", strings.Join(args, " "), before, after)
		}
	}
}
