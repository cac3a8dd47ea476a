package svchash

import "testing"

// TestChain: services that differ only above the low byte of the address
// share a chain; the port and protocol move it; fwmarks are apart.
func TestChain(t *testing.T) {
	a := Chain(6, [4]byte{10, 0, 0, 7}, 80, 0)
	if b := Chain(6, [4]byte{10, 1, 2, 7}, 80, 0); b != a {
		t.Errorf("10.1.2.7:80 in chain %d, 10.0.0.7:80 in %d", b, a)
	}
	if b := Chain(6, [4]byte{10, 0, 0, 7}, 81, 0); b == a {
		t.Errorf("another port in the same chain %d", a)
	}
	if b := Chain(17, [4]byte{10, 0, 0, 7}, 80, 0); b == a {
		t.Errorf("another protocol in the same chain %d", a)
	}
	if got, want := a, 6^7^80; got != want {
		t.Errorf("TCP 10.0.0.7:80 in chain %d, want %d", got, want)
	}
	if m := Chain(0, [4]byte{}, 0, 0x107); m != 256+7 {
		t.Errorf("fwmark 0x107 in chain %d, want 263", m)
	}
}

// TestLong: a chain is long at minLong services and 1/longShare of the
// IPv4 ones, not one service fewer; services not served never are.
func TestLong(t *testing.T) {
	chains := make([]int, 0, 4000)
	for range minLong {
		chains = append(chains, 3)
	}
	for range minLong - 1 {
		chains = append(chains, 4)
	}
	chains = append(chains, -1, -1)
	long := Long(len(chains), func(i int) int { return chains[i] })
	for i, h := range chains {
		if want := h == 3; long[i] != want {
			t.Fatalf("service %d in chain %d: long %v, want %v", i, h, long[i], want)
		}
	}
	// With (longShare × minLong) more IPv4 services elsewhere, minLong
	// is no longer 1/longShare of them.
	for i := range longShare * minLong {
		chains = append(chains, 8+i%200)
	}
	if long := Long(len(chains), func(i int) int { return chains[i] }); long != nil {
		t.Errorf("long chains among %d services, the longest holding %d", len(chains), minLong)
	}
}
