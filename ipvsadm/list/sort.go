package list

import (
	"encoding/binary"
	"net/netip"

	"github.com/lvskit/lvskit/ipvs"
)

// The listing order is whatever glibc 2.36's qsort makes of libipvs's
// comparators: qsort is a stable top-down merge sort there, and the
// comparators subtract unsigned values and read the difference as a signed
// int, so they are not transitive when values lie more than 2^31 apart.
// The result depends on the merge pattern and the input (kernel) order, so
// both are reproduced exactly; a "correct" numeric sort would differ.

// CompareServices is libipvs's service comparator: fwmark, family,
// protocol, address (32-bit words), port, each as a wrapping difference.
func CompareServices(a, b *ipvs.Service) int {
	if r := int32(a.FWMark - b.FWMark); r != 0 {
		return int(r)
	}
	if r := int(a.Family) - int(b.Family); r != 0 {
		return r
	}
	if r := int(a.Protocol) - int(b.Protocol); r != 0 {
		return r
	}
	if r := compareAddrs(a.Family, a.Addr, b.Addr); r != 0 {
		return r
	}
	return int(a.Port) - int(b.Port)
}

// CompareDestinations is libipvs's destination comparator: address, then
// port. The first destination's family decides how many address words are
// compared.
func CompareDestinations(a, b *ipvs.Destination) int {
	if r := compareAddrs(a.Family, a.Addr, b.Addr); r != 0 {
		return r
	}
	return int(a.Port) - int(b.Port)
}

// compareAddrs compares the kernel's 16-byte address forms word by word as
// wrapping 32-bit differences: four words for IPv6, one otherwise.
func compareAddrs(family uint16, a, b netip.Addr) int {
	x, y := addr16(a), addr16(b)
	words := 1
	if family == ipvs.AFInet6 {
		words = 4
	}
	for i := 0; i < words; i++ {
		r := int32(binary.BigEndian.Uint32(x[4*i:]) - binary.BigEndian.Uint32(y[4*i:]))
		if r != 0 {
			return int(r)
		}
	}
	return 0
}

// SortServices orders services as ipvsadm lists them.
func SortServices(s []ipvs.Service) {
	mergeSort(s, make([]ipvs.Service, len(s)), CompareServices)
}

// SortDestinations orders destinations as ipvsadm lists them.
func SortDestinations(d []ipvs.Destination) {
	mergeSort(d, make([]ipvs.Destination, len(d)), CompareDestinations)
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
