package e2e

import (
	"fmt"
	"strings"
)

// BIRD 2 configurations of the ECMP topology; docs/scale-out.md gives the
// same ones for real hosts. The BGP timers are short so that a director
// that dies without a word is withdrawn within seconds: keepalives every
// second, the session dropped after 3 s of silence, and a session that
// ended retried after a second (BIRD's defaults are 240/80 s hold and
// keepalive and a 60 s wait after an error).
const birdTimers = `	hold time 3;
	keepalive time 1;
	connect delay time 1;
	connect retry time 1;
	error wait time 1, 5;
`

// BGPPeer is one director as the router sees it.
type BGPPeer struct{ Name, Addr string }

// RouterBird is the router's configuration: one BGP session per director
// on the same subnet (direct), every route imported, and the kernel
// protocol merging the directors' equal routes to the VIP into one
// multipath route (merge paths), which the kernel spreads by its
// multipath hash (net.ipv4.fib_multipath_hash_policy=1: layer 4).
func RouterBird(id string, as int, peerAS int, peers []BGPPeer) string {
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
`, id, id, as, birdTimers)
	for _, p := range peers {
		fmt.Fprintf(&b, "protocol bgp %s from director { neighbor %s as %d; }\n", p.Name, p.Addr, peerAS)
	}
	return b.String()
}

// DirectorBird is a director's configuration: the VIP/32 announced to the
// router with the director as next hop, nothing imported. Stopping BIRD
// (or the director) withdraws the route.
func DirectorBird(id string, as int, router string, routerAS int, vip string) string {
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
`, id, vip, id, as, router, routerAS, birdTimers, vip)
}
