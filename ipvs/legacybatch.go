package ipvs

import (
	"slices"

	"github.com/lvskit/lvskit/internal/svchash"
)

// IPv4 services are read in batches: those that share a long hash chain
// with their counts in bulk, the others chain by chain.
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

// Services are read in batches of at most legacyBatchLen in the
// caller's order, fewer when they have many destinations: a batch holds
// at most legacyBatchHeld destinations (legacyDestUsed bytes each) until
// they are handed out, so the next batch is sized from the destinations
// per service of the last (never fewer than legacyBatchMin services).
const (
	legacyBatchLen  = 1024
	legacyBatchMin  = 16
	legacyBatchHeld = 16384
)

// A chain is long enough to read in batches by svchash.Long's rule: at
// least 64 services, and at least 1/32 of the IPv4 ones (each batch's
// two counts copy every IPv4 service entry, so counts in bulk pay only
// where they spare a service's count a walk that long).

// Within a batch, the other IPv4 services are read chain by chain, each
// with its answer and the count right after it, and their answers held
// until they are handed out in the caller's order. Every request walks
// the service's chain, and a chain walked a moment ago is still in the
// processor's caches, so the kernel's order is much cheaper than a sorted
// one at 50,000 services (decision 0010). An answer that does not fit
// what a batch holds is read again in the caller's order.

// EachDestinations calls fn with the destinations of service(0) …
// service(n-1) in that order, each as AppendDestinations reads it; the
// slice is valid only during the call. Once fn fails it is not called
// again and its error is returned. IPv4 services are read in batches
// (see above); the others, and whatever a batch does not keep, one at a
// time.
func (c *Conn) EachDestinations(n int, service func(i int) *Service, fn func(i int, dests []DestinationEntry) error) error {
	legacy := c.legacy != nil && c.noStats
	var long []bool
	if legacy {
		long = longChains(n, service)
	}
	var b legacyBatch
	var dests []DestinationEntry
	for start, end := 0, 0; start < n; start = end {
		end = min(n, start+b.nextLen())
		b.reset(start, end)
		if legacy {
			if long != nil {
				c.readBatch(&b, long, service)
			}
			c.readByChain(&b, long, service)
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

// legacyChain returns svc's hash chain (see svchash.Chain); ok is false
// for services the legacy interface does not serve.
func legacyChain(svc *Service) (chain int, ok bool) {
	switch {
	case svc.Family != AFInet:
		return 0, false
	case svc.FWMark != 0:
		return svchash.Chain(0, [4]byte{}, 0, svc.FWMark), true
	case !svc.Addr.Is4():
		return 0, false
	}
	return svchash.Chain(uint16(svc.Protocol), svc.Addr.As4(), svc.Port, 0), true
}

// longChains reports which of the n services lie in long chains, or nil
// when none do.
func longChains(n int, service func(i int) *Service) []bool {
	return svchash.Long(n, func(i int) int {
		if h, ok := legacyChain(service(i)); ok {
			return h
		}
		return -1
	})
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

// legacyBatch is one batch's services and their held answers, as the
// decoded part of each legacy entry (legacyDestUsed bytes). Slot i-start
// is service i's.
type legacyBatch struct {
	start, end int
	// held holds the kept answers, service i's at held[from[s]:to[s]].
	held     []byte
	from, to []int
	kept     []bool
	dests    []DestinationEntry // a kept answer, decoded

	// Of services in long chains: slot maps those of the batch by key,
	// and before and after are their counts around the answers (-1: not
	// counted). counts holds the last IP_VS_SO_GET_SERVICES answer,
	// entries the service entries written in it; fresh says it was
	// taken after every answer in bulk read so far, so it serves as the
	// next batch's first count.
	slot            map[legacyKey]int
	before, after   []int
	counts, entries []byte
	fresh           bool

	// byChain lists the batch's other IPv4 services in the order they
	// are read.
	byChain []chainRead
}

// chainRead is a service to read and its hash chain.
type chainRead struct{ chain, i int }

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

// fits reports whether n more destinations fit what a batch holds.
func (b *legacyBatch) fits(n int) bool {
	return len(b.held)+n*legacyDestUsed <= legacyBatchHeld*legacyDestUsed
}

// hold keeps entries (legacyDestSize bytes apart) as slot s's answer.
func (b *legacyBatch) hold(s int, entries []byte) {
	if b.held == nil {
		// Allocated once, whole: grown by append, it left garbage that
		// raised a listing's peak memory.
		b.held = make([]byte, 0, legacyBatchHeld*legacyDestUsed)
	}
	b.from[s], b.kept[s] = len(b.held), true
	for e := entries; len(e) > 0; e = e[legacyDestSize:] {
		b.held = append(b.held, e[:legacyDestUsed]...)
	}
	b.to[s] = len(b.held)
}

// nextLen is the length of the batch after this one: as many services as
// fit what a batch holds at this one's destinations per kept answer.
func (b *legacyBatch) nextLen() int {
	kept := 0
	for _, k := range b.kept {
		if k {
			kept++
		}
	}
	if kept == 0 || len(b.held) == 0 {
		return legacyBatchLen
	}
	per := (len(b.held)/legacyDestUsed + kept - 1) / kept
	return min(legacyBatchLen, max(legacyBatchMin, legacyBatchHeld/per))
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
		if !long[i] || n < 0 || !b.fits(n) || c.legacy == nil {
			continue
		}
		entries, ok := c.legacyAnswer(service(i), n+1)
		if !ok || len(entries) != n*legacyDestSize {
			continue // refused, tunnelled, or not the count: one at a time
		}
		b.hold(s, entries)
	}
	if b.fresh = c.legacyCounts(b); !b.fresh {
		clear(b.kept) // only answers in bulk are held yet (readByChain follows)
		return
	}
	b.countsInto(b.after)
	for s := range b.after {
		if b.kept[s] && b.after[s] != b.before[s] {
			b.kept[s] = false
		}
	}
}

// readByChain reads the batch's IPv4 services outside long chains chain
// by chain, each with its answer and the count right after it (as
// AppendDestinations does), and keeps the answers that are whole and
// fit.
func (c *Conn) readByChain(b *legacyBatch, long []bool, service func(i int) *Service) {
	b.byChain = b.byChain[:0]
	for i := b.start; i < b.end; i++ {
		if long != nil && long[i] {
			continue
		}
		if h, ok := legacyChain(service(i)); ok {
			b.byChain = append(b.byChain, chainRead{h, i})
		}
	}
	slices.SortStableFunc(b.byChain, func(x, y chainRead) int { return x.chain - y.chain })
	for _, r := range b.byChain {
		if c.legacy == nil {
			return
		}
		s, full := r.i-b.start, false
		if c.readLegacy(service(r.i), func(entries []byte) bool {
			if full = !b.fits(len(entries) / legacyDestSize); full {
				return false
			}
			b.hold(s, entries)
			return true
		}) {
			continue
		}
		if b.kept[s] { // taken, but the count after differs
			b.held, b.kept[s] = b.held[:b.from[s]], false
		}
		if full {
			return // the rest one at a time, in the caller's order
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
