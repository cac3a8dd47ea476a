package rules

import "github.com/lvskit/lvskit/ipvs"

// Probe services carry lvsctl run's checks of direct-routing and tunnelled
// real servers through the director's own table: one firewall-mark service
// per checked real server, with that real server alone, and a probe whose
// socket carries the mark. A real server without the virtual address on
// its loopback then fails its check, as it fails its clients. Their marks
// come from one reserved range, so that plans leave them to lvsctl run.
const (
	ProbeMarkBase uint32 = 0x4c560000 // "LV" in the upper half
	probeMarks    uint32 = 1 << 16
)

// IsProbeService reports whether svc is one of lvsctl run's probe services.
func IsProbeService(svc *ipvs.Service) bool {
	return svc.FWMark >= ProbeMarkBase && svc.FWMark-ProbeMarkBase < probeMarks
}
