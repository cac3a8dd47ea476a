package ipvs_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
)

// sharedChainTable fills k with chained services in one hash chain (TCP
// port 80, addresses equal in their low byte), each with i%4 servers,
// plus spread services after them, and returns them all in the order
// added.
func sharedChainTable(t *testing.T, k *fakeKernel, chained, spread int) []ipvs.Service {
	t.Helper()
	var svcs []ipvs.Service
	add := func(s ipvs.Service, dests int) {
		execFake(t, k, ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s})
		for j := range dests {
			d := destination(fmt.Sprintf("172.16.%d.%d", j, len(svcs)%250+1), 8080, ipvs.FwdMasq, uint32(j))
			execFake(t, k, ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d})
		}
		svcs = append(svcs, s)
	}
	for i := range chained {
		add(v4Service(ipvs.ProtoTCP, fmt.Sprintf("10.%d.%d.7", i/250, i%250), 80), i%4)
	}
	for i := range spread {
		add(v4Service(ipvs.ProtoUDP, fmt.Sprintf("10.99.0.%d", i+1), 53), 2)
	}
	return svcs
}

// eachDestinations reads svcs with ipvs.EachDestinations through c and
// checks that fn saw every service once, in order, with what want lists
// (a Conn reading over netlink alone).
func eachDestinations(t *testing.T, c, want *ipvs.Conn, svcs []ipvs.Service) {
	t.Helper()
	next := 0
	err := ipvs.EachDestinations(c, len(svcs), func(i int) *ipvs.Service { return &svcs[i] },
		func(i int, got []ipvs.DestinationEntry) error {
			if i != next {
				t.Fatalf("service %d handed out after %d", i, next-1)
			}
			next++
			dump, err := ipvs.AppendDestinations(want, nil, &svcs[i])
			if err != nil {
				return err
			}
			if !slices.Equal(got, dump) {
				t.Errorf("%s:\n each    %+v\n netlink %+v", key(svcs[i]), got[:min(len(got), 4)], dump[:min(len(dump), 4)])
			}
			return nil
		})
	if err != nil || next != len(svcs) {
		t.Fatalf("EachDestinations: %v after %d of %d services", err, next, len(svcs))
	}
}

// overNetlink opens a Conn over k that reads without the legacy
// interface and without counters, as the legacy reads are compared with.
func overNetlink(t *testing.T, k *fakeKernel) *ipvs.Conn {
	c := openFake(t, k)
	ipvs.SkipStats(c, true)
	return c
}

// TestBatchedReadsOfOneChain: services in one long hash chain are read
// with one answer each and their counts in bulk, one
// IP_VS_SO_GET_SERVICES before the first batch and one after each (the
// count after a batch is the next one's count before); spread services
// keep their count after each answer. Every service reads what a dump
// lists.
func TestBatchedReadsOfOneChain(t *testing.T) {
	k := newFakeKernel()
	svcs := sharedChainTable(t, k, 2100, 20)
	c := openLegacy(t, k)
	k.legacyCalls = nil
	eachDestinations(t, c, overNetlink(t, k), svcs)
	batches := (len(svcs) + ipvs.LegacyBatchLen - 1) / ipvs.LegacyBatchLen
	if got, want := k.legacyCalls[ipvs.SoGetServices], batches+1; got != want {
		t.Errorf("%d bulk counts, want %d", got, want)
	}
	if got := k.legacyCalls[ipvs.SoGetDests]; got != len(svcs) {
		t.Errorf("%d destination requests for %d services, want one each", got, len(svcs))
	}
	if got := k.legacyCalls[ipvs.SoGetService]; got != 20 {
		t.Errorf("%d counts of one service, want 20 (the spread services')", got)
	}
	if n, _ := ipvs.LegacyReadsForTest(c); n != len(svcs) {
		t.Errorf("%d services read with the legacy interface, want %d", n, len(svcs))
	}
}

// TestBatchesOnlyForLongChains: a table whose chains are all short is
// read with one count a service, none in bulk.
func TestBatchesOnlyForLongChains(t *testing.T) {
	k := newFakeKernel()
	var svcs []ipvs.Service
	for i := range 1000 {
		s := v4Service(ipvs.ProtoTCP, fmt.Sprintf("10.0.%d.%d", i/250, i%250), 80)
		execFake(t, k, ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s})
		svcs = append(svcs, s)
	}
	c := openLegacy(t, k)
	k.legacyCalls = nil
	eachDestinations(t, c, overNetlink(t, k), svcs)
	if n := k.legacyCalls[ipvs.SoGetServices]; n != 0 {
		t.Errorf("%d bulk counts for chains of about 4 services", n)
	}
}

// TestBatchedReadsOfChangingServices: an answer is kept only when both
// bulk counts equal its length. A mixed-family service (an IPv4 server
// and a tunnelled IPv6 one, which the answer leaves out) that gains an
// IPv4 server between the first count and its answer has an answer as
// long as the first count; the second count rules it out. A server
// deleted after the answer, or added before it, makes the service read
// again (and read whole one at a time). Each ends as a dump lists it
// afterwards.
func TestBatchedReadsOfChangingServices(t *testing.T) {
	k := newFakeKernel()
	svcs := sharedChainTable(t, k, 100, 0)
	mixed, added, gone := &svcs[10], &svcs[20], &svcs[30]
	v6 := destination("2001:db8::10", 8080, ipvs.FwdTunnel, 1)
	execFake(t, k, ipvs.Request{Cmd: ipvs.CmdNewDest, Service: mixed, Dest: &v6})
	extra := func(s *ipvs.Service, a string) func() {
		return func() {
			d := destination(a, 8080, ipvs.FwdMasq, 1)
			execFake(t, k, ipvs.Request{Cmd: ipvs.CmdNewDest, Service: s, Dest: &d})
		}
	}
	hooks := map[int]func(){ // by destination request, which follow the services' order
		11: extra(mixed, "172.20.0.1"),
		21: extra(added, "172.20.0.2"),
	}
	dests := 0
	k.beforeLegacyDests = func() {
		dests++
		if h := hooks[dests]; h != nil {
			h()
		}
	}
	k.afterLegacyDests = func() {
		if dests == 31 {
			ds, _ := k.fake.Destinations(*gone)
			execFake(t, k, ipvs.Request{Cmd: ipvs.CmdDelDest, Service: gone, Dest: &ds[0].Destination})
		}
	}
	c := openLegacy(t, k)
	eachDestinations(t, c, overNetlink(t, k), svcs)
	if dests < 31 {
		t.Fatalf("only %d destination requests", dests)
	}
	if n, _ := ipvs.LegacyReadsForTest(c); n != len(svcs)-1 {
		t.Errorf("%d services read with the legacy interface, want all but the mixed one (%d)", n, len(svcs)-1)
	}
}

// TestLegacyChainsOfServices: services that differ only above the low
// byte of the address share a chain; the port and protocol move it; a
// fwmark service is in the fwmark table; IPv6 has none here.
func TestLegacyChainsOfServices(t *testing.T) {
	chain := func(s ipvs.Service) int {
		h, ok := ipvs.LegacyChainForTest(&s)
		if !ok {
			return -1
		}
		return h
	}
	a := chain(v4Service(ipvs.ProtoTCP, "10.0.0.7", 80))
	if b := chain(v4Service(ipvs.ProtoTCP, "10.1.2.7", 80)); b != a {
		t.Errorf("10.1.2.7:80 in chain %d, 10.0.0.7:80 in %d", b, a)
	}
	if b := chain(v4Service(ipvs.ProtoTCP, "10.0.0.7", 81)); b == a {
		t.Errorf("another port in the same chain %d", a)
	}
	if b := chain(v4Service(ipvs.ProtoUDP, "10.0.0.7", 80)); b == a {
		t.Errorf("another protocol in the same chain %d", a)
	}
	if m := chain(ipvs.Service{Family: ipvs.AFInet, FWMark: 0x107}); m != 256+7 {
		t.Errorf("fwmark 0x107 in chain %d, want 263", m)
	}
	if six := chain(ipvs.Service{Family: ipvs.AFInet6, Protocol: ipvs.ProtoTCP, Port: 80}); six != -1 {
		t.Errorf("IPv6 service in legacy chain %d", six)
	}
}

// chainsTable fills k with n TCP services on port 80 in 64 hash chains
// (the chain follows the address's low byte), each with dests servers,
// and returns them in the order added, which jumps between chains.
func chainsTable(t *testing.T, k *fakeKernel, n int, dests func(i int) int) []ipvs.Service {
	t.Helper()
	var svcs []ipvs.Service
	for i := range n {
		s := v4Service(ipvs.ProtoTCP, fmt.Sprintf("10.%d.%d.%d", i/64/250, i/64%250, i%64+1), 80)
		execFake(t, k, ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s})
		for j := range dests(i) {
			d := destination(fmt.Sprintf("172.16.%d.%d", j, i%250+1), 8080, ipvs.FwdMasq, uint32(j))
			execFake(t, k, ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d})
		}
		svcs = append(svcs, s)
	}
	return svcs
}

// chainSwitches counts the requests in asked for a service in another
// hash chain than the request before.
func chainSwitches(t *testing.T, asked []ipvs.Service) int {
	t.Helper()
	n, last := 0, -1
	for _, s := range asked {
		h, ok := ipvs.LegacyChainForTest(&s)
		if !ok {
			t.Fatalf("legacy request for %s, which has no chain", key(s))
		}
		if h != last {
			n++
		}
		last = h
	}
	return n
}

// TestReadsByChain: services in short chains are read chain by chain
// within a batch, each with one answer and one count, and handed out in
// the caller's order with what a dump lists.
func TestReadsByChain(t *testing.T) {
	k := newFakeKernel()
	svcs := chainsTable(t, k, 1000, func(i int) int { return i % 4 })
	c := openLegacy(t, k)
	k.legacyCalls, k.destsAsked = nil, nil
	eachDestinations(t, c, overNetlink(t, k), svcs)
	if n := k.legacyCalls[ipvs.SoGetServices]; n != 0 {
		t.Errorf("%d bulk counts for chains of about 16 services", n)
	}
	if got := k.legacyCalls[ipvs.SoGetDests]; got != len(svcs) {
		t.Errorf("%d destination requests for %d services, want one each", got, len(svcs))
	}
	if got := k.legacyCalls[ipvs.SoGetService]; got != len(svcs) {
		t.Errorf("%d counts for %d services, want one each", got, len(svcs))
	}
	if got := chainSwitches(t, k.destsAsked); got != 64 {
		t.Errorf("requests moved to another chain %d times, want 64 (each chain once)", got)
	}
	if n, _ := ipvs.LegacyReadsForTest(c); n != len(svcs) {
		t.Errorf("%d services read with the legacy interface, want %d", n, len(svcs))
	}
}

// TestBatchesSizedByDestinations: a batch holds at most LegacyBatchHeld
// destinations. What does not fit the first batch is read in the
// caller's order; the batches after it are sized so that their services
// fit, and are read chain by chain.
func TestBatchesSizedByDestinations(t *testing.T) {
	const n, dests = 3000, 40
	k := newFakeKernel()
	svcs := chainsTable(t, k, n, func(int) int { return dests })
	c := openLegacy(t, k)
	k.destsAsked = nil
	eachDestinations(t, c, overNetlink(t, k), svcs)
	first := ipvs.LegacyBatchLen
	fit := ipvs.LegacyBatchHeld / dests
	// The first batch: its services that fit, one request that did not
	// fit, and the rest in the caller's order (each in a new chain).
	index := map[string]int{}
	for i, s := range svcs {
		index[key(s)] = i
	}
	i := slices.IndexFunc(k.destsAsked, func(s ipvs.Service) bool { return index[key(s)] >= first })
	if i < 0 {
		t.Fatalf("no destination request after the first batch")
	}
	if got, want := chainSwitches(t, k.destsAsked[:i]), 64+1+(first-fit); got > want {
		t.Errorf("first batch: requests moved chain %d times, want at most %d", got, want)
	}
	rest := k.destsAsked[i:]
	if len(rest) != n-first {
		t.Fatalf("%d destination requests after the first batch, want %d (one each)", len(rest), n-first)
	}
	batches := (n - first + fit - 1) / fit
	if got, want := chainSwitches(t, rest), 64*batches; got > want {
		t.Errorf("later batches: requests moved chain %d times, want at most %d (%d batches of %d)", got, want, batches, fit)
	}
	if got, _ := ipvs.LegacyReadsForTest(c); got != n {
		t.Errorf("%d services read with the legacy interface, want %d", got, n)
	}
}
