package e2e

import (
	"net/netip"

	"github.com/lvskit/lvskit/lvsprep/birdconf"
)

// BIRD 2 configurations of the ECMP topology, from lvsprep bird's
// generator (lvsprep/birdconf), so the lab runs what lvsprep prints. Both
// log to stderr, which the lab keeps in a file per host. hold is the BGP
// hold time in seconds (at least 3). They panic on a malformed argument:
// their callers pass constants.

// routerBirdConfig is the router's configuration: one BGP session per
// director on the same subnet, host routes imported, and the directors'
// equal routes to a VIP merged into one multipath kernel route.
func routerBirdConfig(id string, as, directorAS uint32, directors []string, hold int) string {
	r := birdconf.Router{RouterID: netip.MustParseAddr(id), AS: as, DirectorAS: directorAS, Hold: hold, Log: "stderr"}
	for _, d := range directors {
		r.Directors = append(r.Directors, netip.MustParseAddr(d))
	}
	return must(r.Config())
}

// directorBirdConfig is a director's configuration announcing vip/32 always
// (lvsprep bird director --static): withdrawn only when BIRD, or the
// director, stops. The ECMP tests use it to control announcements by
// starting and stopping BIRD.
func directorBirdConfig(id string, as uint32, router string, routerAS uint32, vip string, hold int) string {
	return must(birdconf.Director{
		RouterID: netip.MustParseAddr(id), AS: as, Router: netip.MustParseAddr(router), RouterAS: routerAS,
		Static: []netip.Addr{netip.MustParseAddr(vip)}, Hold: hold, Log: "stderr",
	}.Config())
}

// announceBirdConfig is a director's configuration announcing the
// addresses on birdconf.DefaultDevice, as lvsctl run's directors do.
func announceBirdConfig(id string, as uint32, router string, routerAS uint32, hold int) string {
	return must(birdconf.Director{
		RouterID: netip.MustParseAddr(id), AS: as, Router: netip.MustParseAddr(router), RouterAS: routerAS,
		Hold: hold, Log: "stderr",
	}.Config())
}

func must(conf string, err error) string {
	if err != nil {
		panic(err)
	}
	return conf
}
