package health

import (
	"encoding/binary"
	"testing"
)

// TestEchoReply: a reply matches its request by type, sequence number,
// payload and, on a raw socket, identifier; a raw IPv4 socket's reads
// start with the IP header.
func TestEchoReply(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		e := newEcho(v6)
		req := e.request(nil)
		if want := byte(icmpEchoRequest); v6 {
			if req[0] != icmp6EchoRequest {
				t.Errorf("IPv6 request type %d", req[0])
			}
		} else if req[0] != want || icmpChecksum(req) != 0 {
			t.Errorf("IPv4 request type %d, checksum over it %#x, want %d and 0", req[0], icmpChecksum(req), want)
		}
		reply := func(edit func(b []byte)) []byte {
			b := append([]byte(nil), req...)
			b[0] = icmpEchoReply
			if v6 {
				b[0] = icmp6EchoReply
			}
			if edit != nil {
				edit(b)
			}
			return b
		}
		ok := reply(nil)
		if !e.isReply(ok, false, true) || !e.isReply(ok, false, false) {
			t.Errorf("v6 %v: its own reply does not match", v6)
		}
		otherID := reply(func(b []byte) { binary.BigEndian.PutUint16(b[4:], e.id+1) })
		if e.isReply(otherID, false, true) {
			t.Errorf("v6 %v: a reply of another identifier matches on a raw socket", v6)
		}
		if !e.isReply(otherID, false, false) {
			t.Errorf("v6 %v: on a datagram socket the kernel's identifier must do", v6)
		}
		for name, b := range map[string][]byte{
			"the request":        req,
			"another sequence":   reply(func(b []byte) { binary.BigEndian.PutUint16(b[6:], e.seq+1) }),
			"another payload":    reply(func(b []byte) { b[9] ^= 1 }),
			"a code":             reply(func(b []byte) { b[1] = 1 }),
			"a short one":        reply(nil)[:12],
			"an unreachable":     reply(func(b []byte) { b[0] = 3 }),
			"the other family's": reply(func(b []byte) { b[0] = map[bool]byte{false: icmp6EchoReply, true: icmpEchoReply}[v6] }),
			"nothing":            nil,
		} {
			if e.isReply(b, false, true) {
				t.Errorf("v6 %v: %s matches", v6, name)
			}
		}
		if v6 {
			continue
		}
		// A raw IPv4 socket reads the IP header first (here 24 bytes,
		// with options).
		hdr := make([]byte, 24)
		hdr[0] = 0x46
		if !e.isReply(append(hdr, ok...), true, true) {
			t.Error("a reply after an IPv4 header with options does not match")
		}
		for name, b := range map[string][]byte{
			"a header too short": append([]byte{0x44, 0, 0}, ok...),
			"an IPv6 version":    append([]byte{0x66}, append(hdr[1:], ok...)...),
			"no header":          ok,
			"a length beyond it": append([]byte{0x4f}, make([]byte, 19)...),
		} {
			if e.isReply(b, true, true) {
				t.Errorf("%s matches", name)
			}
		}
	}
	if a, b := newEcho(false), newEcho(false); a.seq == b.seq || a.nonce == b.nonce {
		t.Errorf("two requests share a sequence number or a payload: %+v %+v", a, b)
	}
}

// TestICMPChecksum: RFC 1071's example, and an odd length.
func TestICMPChecksum(t *testing.T) {
	if got := icmpChecksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); got != ^uint16(0xddf2) {
		t.Errorf("checksum %#x, want %#x", got, ^uint16(0xddf2))
	}
	if got := icmpChecksum([]byte{0x01}); got != ^uint16(0x0100) {
		t.Errorf("odd length: checksum %#x, want %#x", got, ^uint16(0x0100))
	}
}
