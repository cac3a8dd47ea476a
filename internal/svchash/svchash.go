// Package svchash infers the kernel's IPVS service hash chains.
//
// It tells which chain an IPv4 service is filed in, and which chains are
// long enough for the ipvs client to read their services in batches with
// counts in bulk. It sends no request; the client (ipvs) and the benchmark's
// floor (bench), which sends the same requests raw, share it so that they
// agree on the rule.
package svchash

import "encoding/binary"

// Chain returns the chain of an IPv4 service as the kernel (6.1) hashes
// it, up to the constant it mixes in for the namespace (the same for
// every service of it): 0–255 in the table of addresses and ports,
// 256–511 in that of fwmarks (a fwmark service is known by its mark
// alone). addr is in network order, as the legacy structures hold it.
func Chain(proto uint16, addr [4]byte, port uint16, fwmark uint32) int {
	if fwmark != 0 {
		return 256 + int(fwmark&0xff)
	}
	p := uint32(port)
	h := uint32(proto) ^ binary.BigEndian.Uint32(addr[:]) ^ p>>8 ^ p
	return int(h & 0xff)
}

// chains is the number of chains Chain returns.
const chains = 512

// A chain is long when it holds at least minLong services and at least
// 1/longShare of the IPv4 services: a count in bulk copies every IPv4
// service entry (104 bytes), where a chain walk compares a few fields a
// service, so counts in bulk pay only where they spare a service's count
// a walk that long.
const (
	minLong   = 64
	longShare = 32
)

// Long reports which of n services lie in long chains, given each
// service's chain (negative for a service the legacy interface does not
// serve), or nil when none do. chain is called twice for each service
// (a listing's memory counts: no slice of chains is kept).
func Long(n int, chain func(i int) int) []bool {
	var length [chains]int
	v4 := 0
	for i := range n {
		if h := chain(i); h >= 0 {
			length[h]++
			v4++
		}
	}
	least := max(minLong, v4/longShare)
	var long []bool
	for i := range n {
		if h := chain(i); h >= 0 && length[h] >= least {
			if long == nil {
				long = make([]bool, n)
			}
			long[i] = true
		}
	}
	return long
}
