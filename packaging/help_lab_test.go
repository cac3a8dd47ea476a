//go:build lab

package packaging_test

import (
	"testing"

	"github.com/lvskit/lvskit/lab/labtest"
)

// TestPackagedIpvsadmHelpInLab compares, in the lab's kernel with IPVS,
// ipvsadm -h (and the other invocations the host test compares) of the
// binaries the package ships with Debian's ipvsadm. The lab's bin/ is what
// `make deb` packages: both come from the same `go build` line of the
// Makefile on the same tree (TestDebInstallsIntoThrowawayRoot checks that the
// installed files are that build byte for byte). On the host, without IPVS,
// both programs only fail to open the kernel interface; here they print the
// real help text.
func TestPackagedIpvsadmHelpInLab(t *testing.T) {
	labtest.Netns(t)
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-v"}, {"--bogus"}} {
		want := labtest.Run(t, "", labtest.RefIpvsadm, args...)
		got := labtest.Run(t, "", labtest.Ours("ipvsadm"), args...)
		if got != want {
			t.Errorf("ipvsadm %q:\nours:   %+v\nDebian: %+v", args, got, want)
		}
		if args[0] == "-h" && (want.Code != 0 || len(want.Stdout) != 4645) {
			t.Errorf("Debian's ipvsadm -h in the lab: status %d, %d bytes; the lab kernel should have IPVS", want.Code, len(want.Stdout))
		}
	}
}
