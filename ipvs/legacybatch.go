package ipvs

import "encoding/binary"

// Services that share a hash chain are read in batches.
//
// The kernel (6.1) files services in 256 buckets and every request that
// names a service walks its bucket's chain from the head. Where many
// services share a chain (addresses equal in their low byte, one port),
// each of a service's two legacy requests, the answer and the count
// after it, walks the whole chain: reading the table is quadratic, and
// the count doubles it. For such services EachDestinations takes every
// count at once instead, with one IP_VS_SO_GET_SERVICES (a walk of the
// table, not of a chain per service) before and after a batch of
// answers, and keeps an answer only when its length equals the service's
// count in both. Decision 0010 has the measurements.
//
// That check is weaker than the count right after each answer in one
// way only: a service that held a server of the other family (which the
// answer leaves out) would have to gain a server between the first count
// and its answer and lose one between its answer and the second count,
// both within one batch, for the answer to be kept without that server.
// The count right after an answer needs one deletion within
// microseconds. Neither can be seen through this interface.

// A batch is at most this many services in the caller's order, and holds
// at most legacyBatchHeld destinations (legacyDestUsed bytes each) until
// its second count.
const (
	legacyBatchLen  = 1024
	legacyBatchHeld = 16384
)

// A chain is long enough to read in batches when it holds at least
// longChainMin services and at least 1/longChainShare of the IPv4
// services: each batch's two counts copy every IPv4 service entry (104
// bytes), where a chain walk compares a few fields a service, so counts
// in bulk pay only where they spare a service's count a walk that long.
const (
	longChainMin   = 64
	longChainShare = 32
)

// EachDestinations calls fn with the destinations of service(0) …
// service(n-1) in that order, each as AppendDestinations reads it; the
// slice is valid only during the call. Once fn fails it is not called
// again and its error is returned. IPv4 services in long hash chains are
// read in batches (see above), the others one at a time.
func (c *Conn) EachDestinations(n int, service func(i int) *Service, fn func(i int, dests []DestinationEntry) error) error {
	var long []bool
	if c.legacy != nil && c.noStats {
		long = longChains(n, service)
	}
	var b legacyBatch
	var dests []DestinationEntry
	for start := 0; start < n; start += legacyBatchLen {
		end := min(n, start+legacyBatchLen)
		b.reset(start, end)
		if long != nil {
			c.readBatch(&b, long, service)
		}
		for i := start; i < end; i++ {
			if d, ok := b.answer(i); ok {
				c.replyDatagrams = 1 // one answer, written whole under the kernel's lock
				c.legacyReads++
				if err := fn(i, d); err != nil {
					return err
				}
				continue
			}
			var err error
			if dests, err = c.AppendDestinations(dests[:0], service(i)); err != nil {
				return err
			}
			if err := fn(i, dests); err != nil {
				return err
			}
		}
	}
	return nil
}

// legacyChain returns the kernel's hash chain of svc up to the constant
// the kernel mixes in for the namespace (the same for every service of
// it): 0–255 in the table of addresses and ports, 256–511 in that of
// fwmarks. ok is false for services the legacy interface does not serve.
func legacyChain(svc *Service) (chain int, ok bool) {
	switch {
	case svc.Family != AFInet:
		return 0, false
	case svc.FWMark != 0:
		return 256 + int(svc.FWMark&0xff), true
	case !svc.Addr.Is4():
		return 0, false
	}
	a := svc.Addr.As4()
	port := uint32(svc.Port)
	h := uint32(svc.Protocol) ^ binary.BigEndian.Uint32(a[:]) ^ port>>8 ^ port
	return int(h & 0xff), true
}

// longChains reports which of the n services lie in long chains, or nil
// when none do.
func longChains(n int, service func(i int) *Service) []bool {
	var length [512]int
	v4 := 0
	for i := range n {
		if h, ok := legacyChain(service(i)); ok {
			length[h]++
			v4++
		}
	}
	least := max(longChainMin, v4/longChainShare)
	var long []bool
	for i := range n {
		if h, ok := legacyChain(service(i)); ok && length[h] >= least {
			if long == nil {
				long = make([]bool, n)
			}
			long[i] = true
		}
	}
	return long
}

// legacyKey identifies an IPv4 service in legacy service entries.
type legacyKey struct {
	fwmark uint32
	addr   [4]byte
	port   uint16
	proto  uint16
}

func legacyKeyOf(svc *Service) legacyKey {
	if svc.FWMark != 0 {
		return legacyKey{fwmark: svc.FWMark}
	}
	return legacyKey{addr: svc.Addr.As4(), port: svc.Port, proto: uint16(svc.Protocol)}
}

// legacyBatch is one batch's services in long chains and their held
// answers, as the decoded part of each legacy entry (legacyDestUsed
// bytes). Slot i-start is service i's.
type legacyBatch struct {
	start, end int
	slot       map[legacyKey]int // the batch's services to read, by key
	// before and after are their counts around the answers (-1: not
	// counted); a kept answer is held[from[s]:to[s]].
	before, after []int
	held          []byte
	from, to      []int
	kept          []bool
	dests         []DestinationEntry // a kept answer, decoded
	// counts holds the last IP_VS_SO_GET_SERVICES answer, entries the
	// service entries written in it; fresh says it was taken after every
	// answer read so far, so it serves as the next batch's first count.
	counts, entries []byte
	fresh           bool
}

func (b *legacyBatch) reset(start, end int) {
	b.start, b.end = start, end
	clear(b.slot)
	b.held = b.held[:0]
	size := end - start
	b.before = resize(b.before, size)
	b.after = resize(b.after, size)
	b.from = resize(b.from, size)
	b.to = resize(b.to, size)
	b.kept = resize(b.kept, size)
	clear(b.kept)
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// answer returns service i's held answer, decoded, if it was kept.
func (b *legacyBatch) answer(i int) ([]DestinationEntry, bool) {
	if i < b.start || i >= b.end || !b.kept[i-b.start] {
		return nil, false
	}
	s := i - b.start
	b.dests = appendLegacyDests(b.dests[:0], b.held[b.from[s]:b.to[s]], legacyDestUsed)
	return b.dests, true
}

// readBatch reads the answers of the batch's services in long chains
// between two counts in bulk, and keeps those whose length equals both
// counts. Whatever it does not keep is read one service at a time.
func (c *Conn) readBatch(b *legacyBatch, long []bool, service func(i int) *Service) {
	if b.slot == nil { // the first batch with long chains
		b.slot = make(map[legacyKey]int, legacyBatchLen)
		b.held = make([]byte, 0, legacyBatchHeld*legacyDestUsed)
	}
	for i := b.start; i < b.end; i++ {
		if long[i] {
			b.slot[legacyKeyOf(service(i))] = i - b.start
		}
	}
	if len(b.slot) == 0 {
		return
	}
	if !b.fresh && !c.legacyCounts(b) {
		return
	}
	b.countsInto(b.before)
	for i := b.start; i < b.end; i++ {
		s := i - b.start
		n := b.before[s]
		if !long[i] || n < 0 || len(b.held)+n*legacyDestUsed > cap(b.held) || c.legacy == nil {
			continue
		}
		entries, ok := c.legacyAnswer(service(i), n+1)
		if !ok || len(entries) != n*legacyDestSize {
			continue // refused, tunnelled, or not the count: one at a time
		}
		b.from[s], b.kept[s] = len(b.held), true
		for e := entries; len(e) > 0; e = e[legacyDestSize:] {
			b.held = append(b.held, e[:legacyDestUsed]...)
		}
		b.to[s] = len(b.held)
	}
	if b.fresh = c.legacyCounts(b); !b.fresh {
		clear(b.kept)
		return
	}
	b.countsInto(b.after)
	for s := range b.after {
		if b.kept[s] && b.after[s] != b.before[s] {
			b.kept[s] = false
		}
	}
}

// legacyCounts takes every IPv4 service's entry with one
// IP_VS_SO_GET_SERVICES into b.counts (b.entries, those written); false
// when refused or when the table grew between the kernel's count and the
// answer.
func (c *Conn) legacyCounts(b *legacyBatch) bool {
	if c.legacy == nil {
		return false
	}
	entries, count, ok := c.legacyServiceEntries(&b.counts)
	if !ok || len(entries) > count*legacyServiceSize {
		b.entries = nil
		return false
	}
	c.legacyBulkCounts++
	b.entries = entries
	return true
}

// countsInto sets counts[slot] to the count of destinations in b.entries
// of each of the batch's services, -1 for those not in it.
func (b *legacyBatch) countsInto(counts []int) {
	for s := range counts {
		counts[s] = -1
	}
	for e := b.entries; len(e) > 0; e = e[legacyServiceSize:] {
		svc := legacyEntryService(e)
		if s, ok := b.slot[legacyKeyOf(&svc)]; ok {
			counts[s] = int(hostEndian.Uint32(e[legacyNumDests:]))
		}
	}
}
