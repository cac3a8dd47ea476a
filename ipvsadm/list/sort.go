package list

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/lvskit/lvskit/ipvs"
)

// The listing order is whatever glibc 2.36's qsort makes of libipvs's
// comparators: qsort is a stable top-down merge sort there, and the
// comparators subtract unsigned values and read the difference as a signed
// int, so they are not transitive when values lie more than 2^31 apart.
// The result depends on the merge pattern and the input (kernel) order, so
// both are reproduced exactly; a "correct" numeric sort would differ.

// sortKey holds what the comparators look at, in the 32-bit words libipvs
// compares, so sorting moves small pointer-free values instead of whole
// entries.
type sortKey struct {
	fwmark uint32
	family ipvs.Family
	proto  ipvs.Protocol
	port   uint16
	words  [4]uint32 // the address as the kernel's 16 bytes, big-endian words
	index  int32     // position in the unsorted slice
}

func addrWords(a netip.Addr) [4]uint32 {
	switch {
	case a.Is4():
		b := a.As4()
		return [4]uint32{binary.BigEndian.Uint32(b[:])}
	case a.Is6():
		b := a.As16()
		return [4]uint32{
			binary.BigEndian.Uint32(b[0:]), binary.BigEndian.Uint32(b[4:]),
			binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:]),
		}
	}
	return [4]uint32{}
}

func serviceKey(s *ipvs.Service, i int) sortKey {
	return sortKey{fwmark: s.FWMark, family: s.Family, proto: s.Protocol, port: s.Port, words: addrWords(s.Addr), index: int32(i)}
}

func destKey(d *ipvs.Destination, i int) sortKey {
	return sortKey{family: d.Family, port: d.Port, words: addrWords(d.Addr), index: int32(i)}
}

func destEntryKey(d *ipvs.DestinationEntry, i int) sortKey { return destKey(&d.Destination, i) }

// CompareServices is libipvs's service comparator: fwmark, family,
// protocol, address (32-bit words), port, each as a wrapping difference.
func CompareServices(a, b *ipvs.Service) int {
	x, y := serviceKey(a, 0), serviceKey(b, 0)
	return compareServiceKeys(&x, &y)
}

// CompareDestinations is libipvs's destination comparator: address, then
// port. The first destination's family decides how many address words are
// compared.
func CompareDestinations(a, b *ipvs.Destination) int {
	x, y := destKey(a, 0), destKey(b, 0)
	return compareDestKeys(&x, &y)
}

func compareServiceKeys(a, b *sortKey) int {
	if r := int32(a.fwmark - b.fwmark); r != 0 {
		return int(r)
	}
	if r := int(a.family) - int(b.family); r != 0 {
		return r
	}
	if r := int(a.proto) - int(b.proto); r != 0 {
		return r
	}
	return compareDestKeys(a, b)
}

// compareDestKeys compares addresses word by word as wrapping 32-bit
// differences (four words when a is IPv6, one otherwise), then ports.
func compareDestKeys(a, b *sortKey) int {
	words := 1
	if a.family == ipvs.AFInet6 {
		words = 4
	}
	for i := 0; i < words; i++ {
		if r := int32(a.words[i] - b.words[i]); r != 0 {
			return int(r)
		}
	}
	return int(a.port) - int(b.port)
}

// SortDestinations orders destinations as ipvsadm lists them.
func SortDestinations(d []ipvs.DestinationEntry) {
	var k keySorter
	sortBy(&k, d, make([]ipvs.DestinationEntry, len(d)), destEntryKey, compareDestKeys)
}

// keySorter keeps the key buffers of repeated sorts.
type keySorter struct {
	keys, tmp []sortKey
}

// sortBy sorts a by the keys of its elements with glibc's merge sort and
// then puts the elements in that order, using spare (len(a) long) as the
// copy buffer.
func sortBy[T any](k *keySorter, a, spare []T, key func(*T, int) sortKey, cmp func(x, y *sortKey) int) {
	if len(a) <= 1 {
		return
	}
	k.keys, k.tmp = k.keys[:0], k.tmp[:0]
	for i := range a {
		k.keys = append(k.keys, key(&a[i], i))
	}
	// The kernel lists a service's destinations newest first, so a table
	// restored from a saved file comes back in reverse listing order:
	// where the comparator is a true order on these keys, an input in
	// order or in reverse order needs no merge.
	if consistent(k.keys) {
		switch monotone(k.keys, cmp) {
		case ascending:
			return
		case descending:
			slices.Reverse(a)
			return
		}
	}
	k.tmp = append(k.tmp, k.keys...)
	mergeSort(k.keys, k.tmp, cmp)
	copy(spare, a)
	for i := range k.keys {
		a[i] = spare[k.keys[i].index]
	}
}

// consistent reports whether the comparators are a true (transitive)
// order on keys: every key of one family, and the marks and each compared
// address word within a span of less than 2^31, where the wrapping
// difference has the sign of the true one. (Family, protocol and port are
// compared as plain differences of small numbers.) On such keys a stable
// sort of any algorithm gives glibc's order.
func consistent(keys []sortKey) bool {
	words := 1
	if keys[0].family == ipvs.AFInet6 {
		words = 4
	}
	lo, hi := keys[0].words, keys[0].words
	loMark, hiMark := keys[0].fwmark, keys[0].fwmark
	for i := 1; i < len(keys); i++ {
		k := &keys[i]
		if k.family != keys[0].family {
			return false
		}
		loMark, hiMark = min(loMark, k.fwmark), max(hiMark, k.fwmark)
		for w := range words {
			lo[w], hi[w] = min(lo[w], k.words[w]), max(hi[w], k.words[w])
		}
	}
	if hiMark-loMark >= 1<<31 {
		return false
	}
	for w := range words {
		if hi[w]-lo[w] >= 1<<31 {
			return false
		}
	}
	return true
}

// How keys lie: in order (ties kept), in strictly reverse order, or
// neither.
const (
	unordered = iota
	ascending
	descending
)

func monotone(keys []sortKey, cmp func(x, y *sortKey) int) int {
	up, down := true, true
	for i := 1; i < len(keys) && (up || down); i++ {
		c := cmp(&keys[i-1], &keys[i])
		up = up && c <= 0
		down = down && c > 0
	}
	switch {
	case up:
		return ascending
	case down:
		return descending
	}
	return unordered
}

// mergeSort is glibc's msort_with_tmp: split at n/2 (the left half is the
// smaller one), sort both halves, merge taking the left element while
// cmp(left, right) <= 0. tmp must be at least as long as a.
func mergeSort[T any](a, tmp []T, cmp func(x, y *T) int) {
	n := len(a)
	if n <= 1 {
		return
	}
	n1 := n / 2
	left, right := a[:n1], a[n1:]
	mergeSort(left, tmp, cmp)
	mergeSort(right, tmp, cmp)
	out := tmp[:0]
	i, j := 0, 0
	for i < len(left) && j < len(right) {
		if cmp(&left[i], &right[j]) <= 0 {
			out = append(out, left[i])
			i++
		} else {
			out = append(out, right[j])
			j++
		}
	}
	out = append(out, left[i:]...)
	// Whatever remains of the right half is already in place.
	copy(a, out)
}
