package ipvstest_test

import (
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/conformance"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
)

// TestConformance runs the shared suite against the fake; the lab runs the
// same suite against the kernel (ipvs/netlink_lab_test.go).
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) ipvs.Client {
		f := ipvstest.New()
		t.Cleanup(func() { f.Close() })
		return f
	})
}
