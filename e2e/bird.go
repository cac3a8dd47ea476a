package e2e

import (
	"fmt"
	"strings"
)

// BIRD 2 configurations of the ECMP topology; docs/scale-out.md gives the
// same ones for real hosts. A director that stops BIRD cleanly ends its
// session with a notification and is withdrawn at once; one that dies
// without a word is withdrawn when the hold time runs out, so on real
// hosts it is short (3 s, keepalives every second). Sessions that ended
// are retried after a second (BIRD's defaults: 240 s hold, 80 s
// keepalive, 60 s wait after an error).
func birdTimers(hold int) string {
	return fmt.Sprintf(`	hold time %d;
	keepalive time %d;
	connect delay time 1;
	connect retry time 1;
	error wait time 1, 5;
`, hold, max(1, hold/3))
}

// BGPPeer is one director as the router sees it.
type BGPPeer struct{ Name, Addr string }

// RouterBird is the router's configuration: one BGP session per director
// on the same subnet (direct), every route imported, and the kernel
// protocol merging the directors' equal routes to the VIP into one
// multipath route (merge paths), which the kernel spreads by its
// multipath hash (net.ipv4.fib_multipath_hash_policy=1: layer 4). hold
// is the BGP hold time in seconds (at least 3).
func RouterBird(id string, as int, peerAS int, peers []BGPPeer, hold int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `router id %s;
log stderr all;
protocol device { scan time 10; }
protocol kernel {
	ipv4 { import none; export all; };
	merge paths on;
}
template bgp director {
	local %s as %d;
	direct;
%s	ipv4 { import all; export none; };
}
`, id, id, as, birdTimers(hold))
	for _, p := range peers {
		fmt.Fprintf(&b, "protocol bgp %s from director { neighbor %s as %d; }\n", p.Name, p.Addr, peerAS)
	}
	return b.String()
}

// DirectorBird is a director's configuration: the VIP/32 announced to the
// router with the director as next hop, nothing imported. Stopping BIRD
// (or the director) withdraws the route.
func DirectorBird(id string, as int, router string, routerAS int, vip string, hold int) string {
	return fmt.Sprintf(`router id %s;
log stderr all;
protocol device { scan time 10; }
protocol static vip {
	ipv4;
	route %s/32 unreachable;
}
protocol bgp uplink {
	local %s as %d;
	neighbor %s as %d;
	direct;
%s	ipv4 { import none; export where net = %s/32; };
}
`, id, vip, id, as, router, routerAS, birdTimers(hold), vip)
}
