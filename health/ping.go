package health

import (
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
)

// ICMP echo message types (RFC 792, RFC 4443).
const (
	icmpEchoReply    = 0
	icmpEchoRequest  = 8
	icmp6EchoRequest = 128
	icmp6EchoReply   = 129
)

// echoSeq numbers the echo requests of the process.
var echoSeq atomic.Uint32

// echo is one echo request: its reply must carry back its identifier,
// sequence number and payload.
type echo struct {
	v6    bool
	id    uint16
	seq   uint16
	nonce [8]byte
}

// newEcho makes a request of its own. Its identifier and payload come
// from math/rand, which never waits: crypto/rand's getrandom blocks until
// the kernel's random pool is ready, which may take seconds after a
// virtual machine boots, while the kernel's entropy loop keeps the
// processor busy.
func newEcho(v6 bool) echo {
	e := echo{v6: v6, seq: uint16(echoSeq.Add(1))}
	binary.BigEndian.PutUint64(e.nonce[:], rand.Uint64())
	e.id = binary.BigEndian.Uint16(e.nonce[:2])
	return e
}

// request appends e's echo request to b. Its checksum is computed for
// IPv4; over IPv6 the kernel computes it (it covers a pseudo-header of
// addresses the socket picks).
func (e *echo) request(b []byte) []byte {
	typ := byte(icmpEchoRequest)
	if e.v6 {
		typ = icmp6EchoRequest
	}
	start := len(b)
	b = append(b, typ, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, e.id)
	b = binary.BigEndian.AppendUint16(b, e.seq)
	b = append(b, e.nonce[:]...)
	if !e.v6 {
		binary.BigEndian.PutUint16(b[start+2:], icmpChecksum(b[start:]))
	}
	return b
}

// isReply reports whether pkt is the reply to e. pkt is an ICMP message,
// after an IPv4 header when ipHeader (a raw IPv4 socket's reads). Unless
// checkID, the identifier is not compared: a datagram socket sets its own
// and is handed only the replies that carry it.
func (e *echo) isReply(pkt []byte, ipHeader, checkID bool) bool {
	if ipHeader {
		if len(pkt) < 20 || pkt[0]>>4 != 4 {
			return false
		}
		hl := int(pkt[0]&0x0f) * 4
		if hl < 20 || len(pkt) < hl {
			return false
		}
		pkt = pkt[hl:]
	}
	want := byte(icmpEchoReply)
	if e.v6 {
		want = icmp6EchoReply
	}
	if len(pkt) < 8+len(e.nonce) || pkt[0] != want || pkt[1] != 0 {
		return false
	}
	if checkID && binary.BigEndian.Uint16(pkt[4:]) != e.id {
		return false
	}
	return binary.BigEndian.Uint16(pkt[6:]) == e.seq && string(pkt[8:8+len(e.nonce)]) == string(e.nonce[:])
}

// icmpChecksum is the Internet checksum of b (RFC 1071).
func icmpChecksum(b []byte) uint16 {
	var sum uint32
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
