package list_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/ipvsadm/list/listtest"
)

// sortedFromKernelOrder reads a --nosort listing (the kernel's dump order),
// lists it sorted and returns the lines after the header and titles.
func sortedFromKernelOrder(t *testing.T, nosort string) (string, *listtest.Client) {
	t.Helper()
	tab := listtest.New()
	if err := tab.Add(nosort); err != nil {
		t.Fatal(err)
	}
	c := &listtest.Client{T: tab}
	return table(t, c, list.Options{Numeric: true}), c
}

// TestSortGoldenPairs sorts the kernel order of the golden --nosort
// listings and compares with the sorted listings of the same tables.
func TestSortGoldenPairs(t *testing.T) {
	got, c := sortedFromKernelOrder(t, readGolden(t, "r2/088").out)
	want := readGolden(t, "r2/087").out
	if got != want {
		t.Errorf("r2: sorted listing differs:\n%s", diffLines(want, got))
	}

	// The order is not a numeric one: sorting the same table by address
	// value gives a different listing, so this comparison can fail.
	svcs, _ := c.Services()
	slices.SortStableFunc(svcs, func(a, b ipvs.ServiceEntry) int {
		return strings.Compare(listtest.ServiceKey(&a.Service), listtest.ServiceKey(&b.Service))
	})
	numeric := &listtest.Client{T: listtest.New()}
	for _, s := range svcs {
		ds, _ := c.Destinations(s.Service)
		e := &listtest.Entry{Svc: s.Service, Stats: s.Stats}
		for i := range ds {
			e.Dests = append(e.Dests, &ds[i])
		}
		numeric.T.Services = append(numeric.T.Services, e)
	}
	if naive := table(t, numeric, list.Options{Numeric: true, NoSort: true}); naive == want {
		t.Error("a plain sort reproduced the golden order; the test would not notice a wrong comparator")
	}

	// r11/008: destinations added as 10.1.1.5, .3, .9, .1 are dumped
	// newest first; the sorted listing came first in the transcript.
	out := readGolden(t, "r11/008").out
	half := strings.Index(out[1:], "Prot ") + 1
	sortedPart, nosortPart := out[:half], out[half:]
	tab := listtest.New()
	if err := tab.Add(nosortPart); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	key := tab.Services[0].Svc
	if err := list.Service(&b, &listtest.Client{T: tab}, key, list.Options{Numeric: true}); err != nil {
		t.Fatal(err)
	}
	if b.String() != sortedPart {
		t.Errorf("r11: sorted listing differs:\n%s", diffLines(sortedPart, b.String()))
	}
}

func TestComparatorWraps(t *testing.T) {
	a := tcp("10.0.0.1", 80)
	b := tcp("192.168.1.1", 80)
	c := tcp("100.0.0.1", 80)
	// 0x0A000001 - 0xC0A80101 wraps to a positive int.
	if list.CompareServices(&a, &b) <= 0 {
		t.Error("10.0.0.1 should compare greater than 192.168.1.1")
	}
	if list.CompareServices(&a, &c) >= 0 || list.CompareServices(&c, &b) >= 0 {
		t.Error("10.0.0.1 < 100.0.0.1 < 192.168.1.1 pairwise")
	}
	f1 := ipvs.Service{Family: ipvs.AFInet, FWMark: 1}
	fBig := ipvs.Service{Family: ipvs.AFInet, FWMark: 1 << 31}
	fMax := ipvs.Service{Family: ipvs.AFInet, FWMark: 1<<32 - 1}
	if list.CompareServices(&f1, &a) <= 0 {
		t.Error("fwmark 1 should sort after a normal service")
	}
	if list.CompareServices(&fBig, &a) >= 0 || list.CompareServices(&fMax, &a) >= 0 {
		t.Error("fwmarks of 2^31 and above should sort before normal services")
	}
	if list.CompareServices(&fMax, &f1) >= 0 {
		t.Error("fwmark 4294967295 (FWM  -1) should sort before fwmark 1")
	}
	d1 := dest("1.1.1.1", 443, 0)
	d2 := dest("250.1.1.1", 443, 0)
	if list.CompareDestinations(&d1.Destination, &d2.Destination) <= 0 {
		t.Error("1.1.1.1 should compare greater than 250.1.1.1")
	}
	v6 := dest("2001:db8::1", 80, 0)
	if list.CompareDestinations(&v6.Destination, &d1.Destination) == 0 {
		t.Error("an IPv6 destination compares four words")
	}
}

// referenceMsort is glibc's msort written the simple way (new slices at
// every level), to check the in-place version on random inputs.
func referenceMsort(a []ipvs.DestinationEntry) []ipvs.DestinationEntry {
	if len(a) <= 1 {
		return slices.Clone(a)
	}
	n1 := len(a) / 2
	l, r := referenceMsort(a[:n1]), referenceMsort(a[n1:])
	var out []ipvs.DestinationEntry
	for len(l) > 0 && len(r) > 0 {
		if list.CompareDestinations(&l[0].Destination, &r[0].Destination) <= 0 {
			out, l = append(out, l[0]), l[1:]
		} else {
			out, r = append(out, r[0]), r[1:]
		}
	}
	return append(append(out, l...), r...)
}

// TestSortMatchesReferenceMerge: destinations in any order, in order and
// in reverse order (as the kernel returns a restored table), with
// addresses of both families spread over the whole range or within a
// span where the comparator is a true order, and ties, sort as glibc's
// merge sorts them.
func TestSortMatchesReferenceMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shortcuts := 0
	for round := 0; round < 5000; round++ {
		n := rng.IntN(40)
		ds := make([]ipvs.DestinationEntry, n)
		v6, near, mixed := rng.IntN(3) == 0, rng.IntN(2) == 0, rng.IntN(5) == 0
		// Few distinct address words, spread over the whole range (where
		// comparisons wrap) or near one another, and few ports: ties are
		// common, and an IPv6 address's later words often decide.
		pool := make([]uint32, 1+rng.IntN(4))
		for j := range pool {
			pool[j] = rng.Uint32()
			if near {
				pool[j] = 0x7fff0000 + rng.Uint32N(1<<20)
			}
		}
		for i := range ds {
			var a [16]byte
			binary.BigEndian.PutUint32(a[0:], pool[rng.IntN(len(pool))])
			binary.BigEndian.PutUint32(a[12:], pool[rng.IntN(len(pool))])
			if v6 {
				ds[i].Destination = ipvs.Destination{Family: ipvs.AFInet6, Addr: netip.AddrFrom16(a), Port: uint16(rng.IntN(3))}
			} else {
				ds[i].Destination = ipvs.Destination{Family: ipvs.AFInet, Addr: netip.AddrFrom4([4]byte(a[:4])), Port: uint16(rng.IntN(3))}
			}
			if mixed && rng.IntN(2) == 0 {
				ds[i].Family ^= ipvs.AFInet ^ ipvs.AFInet6 // the other family's tag
			}
			ds[i].Weight = uint32(i) // not compared: tells ties apart
		}
		switch rng.IntN(3) {
		case 0:
			ds = referenceMsort(ds)
		case 1:
			ds = referenceMsort(ds)
			slices.Reverse(ds)
		}
		want := referenceMsort(ds)
		if slices.Equal(want, ds) || slices.Equal(want, reversed(ds)) {
			shortcuts++
		}
		got := slices.Clone(ds)
		list.SortDestinations(got)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: order differs from glibc's merge", round)
		}
	}
	if shortcuts < 1000 {
		t.Errorf("only %d inputs in order or reverse order: the test explores too little", shortcuts)
	}
}

func reversed[T any](s []T) []T {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}
