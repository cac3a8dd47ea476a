package listtest

import (
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
)

// Generated is an ipvs.Reader whose table is computed, not
// stored: NumServices TCP services on distinct addresses, each with
// DestsPerService masqueraded destinations. Destinations are built afresh
// on every call, so a listing that streams holds only one service's worth.
type Generated struct {
	NumServices, DestsPerService int
}

var (
	_ ipvs.Reader = (*Generated)(nil)
	_ ipvs.Dumper = (*Generated)(nil)
)

func (g *Generated) service(i int) ipvs.ServiceEntry {
	// Spread addresses over the whole IPv4 range so the sort sees
	// wrapping comparisons.
	v := uint32(i) * 2654435761
	return ipvs.ServiceEntry{Service: ipvs.Service{
		Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP,
		Addr: netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}),
		Port: 80 + uint16(i%3), Scheduler: "wlc", Netmask: 0xffffffff,
	}, Stats: ipvs.Stats{Conns: uint64(i), InBytes: uint64(i) * 1_000_003}}
}

// Info reports Debian 12's version and size.
func (g *Generated) Info() (ipvs.Info, error) {
	return ipvs.Info{Version: 0x010201, ConnTabSize: 4096}, nil
}

// Services returns the generated services in index order.
func (g *Generated) Services() ([]ipvs.ServiceEntry, error) {
	out := make([]ipvs.ServiceEntry, g.NumServices)
	for i := range out {
		out[i] = g.service(i)
	}
	return out, nil
}

// Service is not supported.
func (g *Generated) Service(ipvs.Service) (ipvs.ServiceEntry, error) {
	return ipvs.ServiceEntry{}, unix.EOPNOTSUPP
}

// Destinations computes the destinations of svc.
func (g *Generated) Destinations(svc ipvs.Service) ([]ipvs.DestinationEntry, error) {
	return g.AppendDestinations(make([]ipvs.DestinationEntry, 0, g.DestsPerService), &svc)
}

// DumpServices hands out the generated services one at a time, as
// ipvs.Conn does: listing through it holds only what the lister keeps.
func (g *Generated) DumpServices(fn func(*ipvs.ServiceEntry) error) error {
	for i := range g.NumServices {
		s := g.service(i)
		if err := fn(&s); err != nil {
			return err
		}
	}
	return nil
}

// AppendDestinations appends the destinations of svc to dst.
func (g *Generated) AppendDestinations(dst []ipvs.DestinationEntry, svc *ipvs.Service) ([]ipvs.DestinationEntry, error) {
	a := svc.Addr.As4()
	for i := range g.DestsPerService {
		dst = append(dst, ipvs.DestinationEntry{Destination: ipvs.Destination{
			Family: ipvs.AFInet, Addr: netip.AddrFrom4([4]byte{192, a[1], a[2], byte(i)}),
			Port: 8080, FwdMethod: ipvs.FwdMasq, Weight: uint32(i),
		}, DestCounters: ipvs.DestCounters{ActiveConns: uint32(i)}})
	}
	return dst, nil
}

// Timeouts returns zeros.
func (g *Generated) Timeouts() (ipvs.Timeouts, error) { return ipvs.Timeouts{}, nil }

// Daemons returns none.
func (g *Generated) Daemons() ([]ipvs.Daemon, error) { return nil, nil }
