package list_test

import (
	"io"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/ipvsadm/list/listtest"
)

// cachedClient serves a generated table from memory with constant-time
// lookups, returning fresh copies like a kernel client does.
type cachedClient struct {
	*listtest.Generated
	svcs  []ipvs.ServiceEntry
	dests map[netip4port][]ipvs.DestinationEntry
}

type netip4port struct {
	a    [4]byte
	port uint16
}

func newCached(n, m int) *cachedClient {
	g := &listtest.Generated{NumServices: n, DestsPerService: m}
	c := &cachedClient{Generated: g, dests: map[netip4port][]ipvs.DestinationEntry{}}
	c.svcs, _ = g.Services()
	for _, s := range c.svcs {
		c.dests[netip4port{s.Addr.As4(), s.Port}], _ = g.Destinations(s.Service)
	}
	return c
}

func (c *cachedClient) Services() ([]ipvs.ServiceEntry, error) {
	return append([]ipvs.ServiceEntry(nil), c.svcs...), nil
}

func (c *cachedClient) Destinations(s ipvs.Service) ([]ipvs.DestinationEntry, error) {
	return append([]ipvs.DestinationEntry(nil), c.dests[netip4port{s.Addr.As4(), s.Port}]...), nil
}

func BenchmarkTableCached1000x10(b *testing.B) {
	c := newCached(1000, 10)
	info, _ := c.Info()
	for b.Loop() {
		if err := list.Table(io.Discard, c, info, list.Options{Numeric: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFetchOnlyCached1000x10(b *testing.B) {
	c := newCached(1000, 10)
	for b.Loop() {
		svcs, _ := c.Services()
		for _, s := range svcs {
			c.Destinations(s.Service)
		}
	}
}
