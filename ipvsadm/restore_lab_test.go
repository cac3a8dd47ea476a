//go:build lab

package ipvsadm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/lab/labtest"
)

// labRestoreInputs are the fixed restore cases: empty input, blank lines,
// good lines, names, and errors in the middle of an input.
var labRestoreInputs = []struct{ name, input string }{
	{"empty", ""},
	{"blank lines", "\n \n\t\r\n"},
	{"good", "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 192.168.10.1:80 -m -w 3\n-A -u 10.0.0.2:53 -s wlc -p 60\n-a -u 10.0.0.2:53 -r 192.168.10.2 -g\n-A -f 7 -s sh -b sh-port\n-a -f 7 -r 192.168.10.3 -i --tun-type gue --tun-port 6080 --tun-csum\n"},
	{"names", "-A -t vip1.example.com:http\n-a -t vip1.example.com:http -r rs1.example.com -m\n-A -t [vip6.example.com]:https -s lc -p 60 -M 48\n"},
	{"validation error in the middle stops", "-A -t 10.0.0.1:80\n-A -t 10.0.0.1:80\n-A -t 10.0.0.9\n-A -t 10.0.0.2:80\n"},
	{"popt errors in the middle go on", "-A -t 10.0.0.1:80\n-L --bogus\n-a -t 10.0.0.1:80 -w\n-A -t 10.0.0.2:80\n"},
	{"kernel errors in the middle go on", "-A -t 10.0.0.1:80 -s nosuch\n-a -t 10.0.0.1:80 -r 1.1.1.1\n-A -t 10.0.0.1:80\n-A -t 10.0.0.1:80\n-a -t 10.0.0.1:80 -r 1.1.1.1 -x 5 -y 10\n-e -t 10.0.0.1:80 -r 1.1.1.2\n-d -t 10.0.0.1:80 -r 1.1.1.2\n-D -t 10.0.0.3:80\n-A -t 10.0.0.2:80\n"},
	{"kernel error last", "-A -t 10.0.0.1:80\n-A -t 10.0.0.2:80\n-A -t 10.0.0.1:80\n"},
	{"comment line stops", "-A -t 10.0.0.1:80\n# comment\n-A -t 10.0.0.2:80\n"},
	{"comment word", "-A -t 10.0.0.1:80 # x\n-A -t 10.0.0.2:80\n"},
	{"nested restore stops", "-A -t 10.0.0.1:80\n-R\n-A -t 10.0.0.2:80\n"},
	{"version stops", "-A -t 10.0.0.1:80\n-v\n-A -t 10.0.0.2:80\n"},
	{"help stops", "-A -t 10.0.0.1:80\n-h\n-A -t 10.0.0.2:80\n"},
	{"listings inside", "-A -t 10.0.0.1:80\n-a -t 10.0.0.1:80 -r 192.168.10.1\n-L -n\n-A -t 10.0.0.1:80\n-S -n\n-L --timeout\n--set 10 20 30\n-L --timeout\n-Z\n"},
	{"CRLF and tabs", "\t-A\t-t 10.0.0.1:80\r\n-a -t 10.0.0.1:80 -r 10.1.1.1\r\n\r\n"},
	{"ipvsadm words dropped", "ipvsadm -A ipvsadm -t 1.1.1.4:80\nipvsadm\n-a -t 1.1.1.4:80 ipvsadm -r 10.1.1.1\n"},
	{"no newline at the end", "-A -t 10.0.0.1:80\n-A -t 10.0.0.2:80"},
	{"one space at the end", "-A -t 10.0.0.1:80\n-A -t 10.0.0.2:80 "},
	{"white space at the end drops the line", "-A -t 10.0.0.1:80\n-A -t 10.0.0.2:80   "},
	{"crash", "-A -t 10.0.0.1:80\n-L -n\n-A -t 10.0.0.2:80 -b ,\n-A -t 10.0.0.3:80\n"},
	{"flush in the middle", "-A -t 10.0.0.1:80\n-C\n-A -t 10.0.0.2:80\n-A -t 10.0.0.2:80\n"},
	{"save losses", "-A -f 4294967295 -s rr\n-A -t 10.0.0.9:80 -s mh -b flag-3\n-A -t 10.0.0.1:80 -M 255.255.0.0\n-a -t 10.0.0.1:80 -r 192.168.10.1 -x 10 -y 5\n-A -t 10.0.0.2:80 -p 10 -M 255.255.0.0\n"},
}

// TestLabRestoreLikeReference restores the same inputs with the reference
// ipvsadm -R and ours, each in a fresh namespace: the same messages, the
// same status, the same tables.
func TestLabRestoreLikeReference(t *testing.T) {
	labtest.Require(t)
	check := func(name, input string) {
		t.Helper()
		ref := labtest.InFreshNetns(t, name+"/reference", func(t *testing.T) labtest.Result {
			return labtest.RunClean(t, input, labtest.RefIpvsadm, "-R")
		})
		ours := labtest.InFreshNetns(t, name+"/ours", func(t *testing.T) labtest.Result {
			return labtest.RunClean(t, input, labtest.Ours("ipvsadm"), "-R")
		})
		labtest.CompareOutcomes(t, fmt.Sprintf("%s (input %q)", name, input), ref, ours, true)
	}
	for _, tc := range labRestoreInputs {
		check(tc.name, tc.input)
	}
	// Generated inputs, as in the host test that compares our two engines,
	// without sync daemons (whose start-up races with a quick stop).
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 30 {
		var input string
		for {
			input = genInput(rng)
			if !strings.Contains(input, "daemon") {
				break
			}
		}
		check(fmt.Sprintf("generated-%02d", i), input)
	}
}

// TestLabRoundTrip: tables generated through the fake are saved with our
// -S -n, and the rules restored through the reference and through ours:
// both must print the same and leave tables that save alike. Then the
// table restored by ours goes through our ipvsadm-save -n and
// ipvsadm-restore and must come back unchanged.
func TestLabRoundTrip(t *testing.T) {
	labtest.Require(t)
	rng := rand.New(rand.NewPCG(21, 22))
	for i := range 12 {
		f := ipvstest.New()
		genTable(rng, f, 1+rng.IntN(15), 4)
		saved := ipvsadmOn(t, f, "", "-S", "-n")
		if saved.status != 0 {
			t.Fatalf("save on the fake: %+v", saved)
		}
		exact := !mayWrap(stateOf(t, f))
		name := fmt.Sprintf("table-%02d", i)
		ref := labtest.InFreshNetns(t, name+"/reference", func(t *testing.T) labtest.Result {
			return labtest.RunClean(t, saved.stdout, labtest.RefIpvsadm, "-R")
		})
		var again labtest.Result
		ours := labtest.InFreshNetns(t, name+"/ours", func(t *testing.T) labtest.Result {
			r := labtest.RunClean(t, saved.stdout, labtest.Ours("ipvsadm"), "-R")
			first := labtest.RunClean(t, "", labtest.Ours("ipvsadm-save"), "-n")
			restore := labtest.RunClean(t, first.Stdout, labtest.Ours("ipvsadm-restore"))
			second := labtest.RunClean(t, "", labtest.Ours("ipvsadm-save"), "-n")
			if restore.Code != 0 || restore.Stderr != "" || !labtest.SameLines(first.Stdout, second.Stdout) {
				t.Errorf("ipvsadm-save -n | ipvsadm-restore changed the table: restore %+v\nbefore:\n%s\nafter:\n%s", restore, first.Stdout, second.Stdout)
			}
			again = second
			return r
		})
		labtest.CompareOutcomes(t, fmt.Sprintf("%s (rules\n%s)", name, saved.stdout), ref, ours, exact)
		if ours.Run.Code == 0 && !labtest.SameLines(again.Stdout, saved.stdout) {
			t.Errorf("%s: the kernel's table does not save as the fake's did:\nfake:\n%s\nkernel:\n%s", name, saved.stdout, again.Stdout)
		}
	}
}

// TestLabRestoreLarge restores 1,000 services × 10 destinations through
// both and compares the tables (the benchmark does 10,000 × 10).
func TestLabRestoreLarge(t *testing.T) {
	labtest.Require(t)
	var b strings.Builder
	for i := range 1000 {
		// Last bytes vary: they choose the kernel's service hash bucket.
		x, y := i/250, i%250+1
		fmt.Fprintf(&b, "-A -t 10.0.%d.%d:80 -s wlc\n", x, y)
		for j := 1; j <= 10; j++ {
			fmt.Fprintf(&b, "-a -t 10.0.%d.%d:80 -r 192.168.%d.%d:80 -m -w 1\n", x, y, j, y)
		}
	}
	input := b.String()
	ref := labtest.InFreshNetns(t, "reference", func(t *testing.T) labtest.Result {
		return labtest.RunClean(t, input, labtest.RefIpvsadm, "-R")
	})
	ours := labtest.InFreshNetns(t, "ours", func(t *testing.T) labtest.Result {
		return labtest.RunClean(t, input, labtest.Ours("ipvsadm"), "-R")
	})
	// All addresses lie in 10/8 and 192.168/16, where the sort is a true
	// order: the two namespaces must save identical text.
	labtest.CompareOutcomes(t, "1,000×10", ref, ours, true)
	if n := strings.Count(ours.RefSave.Stdout, "\n"); n != 11000 {
		t.Errorf("the restored table saves to %d lines, want 11000", n)
	}
}
