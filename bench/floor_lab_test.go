//go:build lab

package bench

// The floor: the bare netlink requests an operation needs, sent by the
// cheapest program that can send them. Requests are encoded before the
// clock starts (restore), dump answers are not decoded beyond the service
// identities the destination dumps need, and nothing is formatted. It uses
// neither package ipvs nor anything else of ours, so it measures the
// kernel's interface and not our client.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/internal/svchash"
	"github.com/lvskit/lvskit/internal/sysenv"
)

var ne = binary.NativeEndian

// Netlink and IPVS numbers (include/uapi/linux/netlink.h, genetlink.h,
// ip_vs.h).
const (
	nlmFRequest = 0x1
	nlmFAck     = 0x4
	nlmFDump    = 0x300
	nlmsgNoop   = 1
	nlmsgError  = 2
	nlmsgDone   = 3
	genlIDCtrl  = 0x10

	cmdNewService = 1
	cmdGetService = 4
	cmdNewDest    = 5
	cmdGetDest    = 8
	cmdGetInfo    = 15
	cmdZero       = 16
	cmdFlush      = 17

	attrService = 1
	attrDest    = 2
	nested      = 0x8000
)

// floorRecvBuffers is how many datagrams one recvmmsg may take.
const floorRecvBuffers = 8

// rawConn is a bare generic netlink socket to the IPVS family.
type rawConn struct {
	fd     int
	family uint16
	seq    uint32
	out    []byte
	bufs   [floorRecvBuffers][]byte
	iovs   [floorRecvBuffers]unix.Iovec
	msgs   [floorRecvBuffers]unix.Mmsghdr
}

// openRaw opens the socket with a receive buffer of bufSize bytes per
// datagram and resolves the IPVS family.
func openRaw(bufSize int) (*rawConn, error) { return openRawFamily(bufSize, "IPVS") }

func openRawFamily(bufSize int, name string) (*rawConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, err
	}
	c := &rawConn{fd: fd}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		c.close()
		return nil, err
	}
	// A lost answer fails the run instead of hanging it.
	tv := unix.Timeval{Sec: 60}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
	mem := make([]byte, floorRecvBuffers*bufSize)
	for i := range c.bufs {
		c.bufs[i] = mem[i*bufSize : (i+1)*bufSize]
		c.iovs[i].Base = &c.bufs[i][0]
		c.iovs[i].SetLen(bufSize)
		c.msgs[i].Hdr.Iov = &c.iovs[i]
		c.msgs[i].Hdr.Iovlen = 1
	}
	c.begin(genlIDCtrl, nlmFRequest|nlmFAck, 3 /* CTRL_CMD_GETFAMILY */, 1)
	c.attr(2 /* CTRL_ATTR_FAMILY_NAME */, append([]byte(name), 0))
	c.end()
	err = c.exchange(false, func(p []byte) {
		forAttrs(p[4:], func(t uint16, v []byte) {
			if t == 1 /* CTRL_ATTR_FAMILY_ID */ && len(v) >= 2 {
				c.family = ne.Uint16(v)
			}
		})
	})
	if err == nil && c.family == 0 {
		err = errors.New("no IPVS generic netlink family")
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *rawConn) close() { unix.Close(c.fd) }

// begin starts a message at the end of c.out.
func (c *rawConn) begin(typ, flags uint16, cmd uint8, version uint8) {
	c.seq++
	var h [20]byte
	ne.PutUint16(h[4:], typ)
	ne.PutUint16(h[6:], flags)
	ne.PutUint32(h[8:], c.seq)
	h[16], h[17] = cmd, version
	c.out = append(c.out, h[:]...)
}

// end sets the length of the message begun last (the only one in c.out
// unless a batch is being built; see encodeRestore).
func (c *rawConn) end() { ne.PutUint32(c.out, uint32(len(c.out))) }

func (c *rawConn) attr(typ uint16, v []byte) {
	c.out = appendAttr(c.out, typ, v)
}

func appendAttr(b []byte, typ uint16, v []byte) []byte {
	b = ne.AppendUint16(b, uint16(4+len(v)))
	b = ne.AppendUint16(b, typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// forAttrs calls fn for each attribute of the stream b.
func forAttrs(b []byte, fn func(typ uint16, v []byte)) {
	for len(b) >= 4 {
		l := int(ne.Uint16(b))
		if l < 4 || l > len(b) {
			return
		}
		fn(ne.Uint16(b[2:])&0x3fff, b[4:l])
		b = b[min((l+3)&^3, len(b)):]
	}
}

// exchange sends c.out and reads answers until the acknowledgement (or
// NLMSG_DONE when dump), handing each reply's payload to each.
func (c *rawConn) exchange(dump bool, each func(payload []byte)) error {
	if _, err := unix.Write(c.fd, c.out); err != nil {
		return err
	}
	c.out = c.out[:0]
	seq := c.seq
	for {
		n, err := c.recv()
		if err != nil {
			return err
		}
		for i := range n {
			d := c.bufs[i][:c.msgs[i].Len]
			for len(d) >= 16 {
				l := int(ne.Uint32(d))
				if l < 16 || l > len(d) {
					return errors.New("malformed answer")
				}
				typ, mseq, payload := ne.Uint16(d[4:]), ne.Uint32(d[8:]), d[16:l]
				d = d[min((l+3)&^3, len(d)):]
				// A failure answers whatever request failed: a restore's
				// requests go unacknowledged ahead of the barrier, and
				// the kernel reports their errors all the same.
				if typ == nlmsgError {
					if code := int32(ne.Uint32(payload)); code != 0 {
						return unix.Errno(-code)
					}
				}
				if mseq != seq {
					continue
				}
				switch typ {
				case nlmsgError:
					if !dump {
						return nil
					}
				case nlmsgDone:
					return nil
				default:
					if each != nil {
						each(payload)
					}
				}
			}
		}
	}
}

// recv takes the datagrams already queued, waiting for the first.
func (c *rawConn) recv() (int, error) {
	for i := range c.msgs {
		c.msgs[i].Hdr.Flags = 0
		c.msgs[i].Len = 0
	}
	for {
		r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&c.msgs[0])),
			floorRecvBuffers, unix.MSG_WAITFORONE, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		for i := range int(r) {
			if c.msgs[i].Hdr.Flags&unix.MSG_TRUNC != 0 {
				return 0, errors.New("datagram larger than the receive buffer")
			}
		}
		return int(r), nil
	}
}

// request sends one IPVS request without attributes and waits for it.
func (c *rawConn) request(cmd uint8, flags uint16) error {
	c.begin(c.family, nlmFRequest|nlmFAck|flags, cmd, 1)
	c.end()
	return c.exchange(flags&nlmFDump != 0, nil)
}

// floorList is what listing (and saving) the table takes: GET_INFO, a
// GET_SERVICE dump, and a GET_DEST dump per service naming it by the
// identity attributes the service dump returned, sent over dests (c
// itself, or a second socket with page-sized buffers, as ipvs.Open has:
// the kernel then builds cheaper datagrams, see ipvs.openDumpSocket).
func (c *rawConn) floorList(dests *rawConn, legacy *legacyFloor) error {
	if err := c.request(cmdGetInfo, 0); err != nil {
		return err
	}
	var ids [][]byte // each service's identity attributes, as received
	c.begin(c.family, nlmFRequest|nlmFAck|nlmFDump, cmdGetService, 1)
	c.end()
	err := c.exchange(true, func(p []byte) {
		forAttrs(p[4:], func(t uint16, v []byte) {
			if t != attrService {
				return
			}
			var id []byte
			forAttrs(v, func(st uint16, sv []byte) {
				if st >= 1 && st <= 5 { // AF, PROTOCOL, ADDR, PORT, FWMARK
					id = appendAttr(id, st, sv)
				}
			})
			ids = append(ids, id)
		})
	})
	if err != nil {
		return err
	}
	if legacy != nil {
		if err := legacy.start(ids); err != nil {
			return err
		}
	}
	for i, id := range ids {
		if legacy != nil {
			if ok, err := legacy.dests(i); ok || err != nil {
				if err != nil {
					return err
				}
				continue
			}
		}
		dests.begin(dests.family, nlmFRequest|nlmFAck|nlmFDump, cmdGetDest, 1)
		dests.attr(attrService|nested, id)
		dests.end()
		if err := dests.exchange(true, nil); err != nil {
			return err
		}
	}
	if legacy != nil {
		return legacy.finish()
	}
	return nil
}

// legacyFloor reads IPv4 services' destinations the way ipvs.Conn does
// while SkipStats is on (see ipvs.Conn.EachDestinations), nothing
// decoded. A service alone or in a short hash chain: one
// IP_VS_SO_GET_DESTS answer offering twice the room the last service
// needed (at least 16 entries, each slot marked), then the service's
// count (IP_VS_SO_GET_SERVICE); an answer that fills its room is counted
// first and asked again. Services in long chains (as svchash.Long
// finds them): in batches of 1,024 services in the dump's order, every
// count at once with one IP_VS_SO_GET_SERVICES before the batch's answers
// (unless the last batch's second count is at hand) and one after, and
// one answer a service with one slot more than its count. With all set,
// every service is read that way with one count in bulk for the whole
// table and none after: less than any correct client can ask. Every
// service is read in the dump's order, the kernel's chain by chain,
// where the client reads chain by chain only within each batch.
type legacyFloor struct {
	fd      int
	buf     []byte
	guess   int
	all     bool
	keys    [][16]byte // each service's, from start
	v4      []bool     // whether the interface serves it
	long    []bool
	batch   int  // the batch of the last counts in bulk
	pending bool // answers were read after them
	counts  map[[16]byte]int
}

// The getsockopt requests and struct sizes (include/uapi/linux/ip_vs.h),
// and the client's batches (ipvs/legacybatch.go).
const (
	soGetInfo         = 64 + 1024 + 64 + 1
	soGetServices     = 64 + 1024 + 64 + 2
	soGetService      = 64 + 1024 + 64 + 3
	soGetDests        = 64 + 1024 + 64 + 4
	legacyServiceSize = 104
	legacyDestSize    = 96
	legacyBatchLen    = 1024
)

// legacyKey returns the service's identity as the legacy structures lay
// it out (protocol, addr, port, fwmark), and false for a service the
// interface does not serve (IPv6).
func legacyKey(id []byte) (key [16]byte, v4 bool) {
	forAttrs(id, func(t uint16, v []byte) {
		switch t {
		case 1:
			v4 = ne.Uint16(v) == unix.AF_INET
		case 2:
			copy(key[0:2], v[:2])
		case 3:
			copy(key[4:8], v[:4])
		case 4:
			copy(key[8:10], v[:2])
		case 5:
			copy(key[12:16], v[:4])
		}
	})
	return key, v4
}

// start marks the services in long hash chains (as the client infers
// them: svchash), or, with all, takes every count.
func (l *legacyFloor) start(ids [][]byte) error {
	l.keys = make([][16]byte, len(ids))
	l.v4 = make([]bool, len(ids))
	for i, id := range ids {
		l.keys[i], l.v4[i] = legacyKey(id)
	}
	if l.all {
		return l.loadCounts()
	}
	l.long = svchash.Long(len(ids), func(i int) int {
		if !l.v4[i] {
			return -1
		}
		key := &l.keys[i]
		return svchash.Chain(ne.Uint16(key[0:]), [4]byte(key[4:8]), binary.BigEndian.Uint16(key[8:]), ne.Uint32(key[12:]))
	})
	return nil
}

// dests reads the destinations of service i and reports false for a
// service the interface does not serve.
func (l *legacyFloor) dests(i int) (bool, error) {
	key := l.keys[i]
	if !l.v4[i] {
		return false, nil
	}
	if l.all {
		_, err := l.answer(key, l.counts[key]+1)
		return true, err
	}
	if l.long != nil && l.long[i] {
		// A batch's first count is the last one's second (or the
		// first of all); its second is taken when the next batch or
		// the listing's end is reached (see finish).
		if batch := i / legacyBatchLen; l.counts == nil || batch != l.batch && l.pending {
			if err := l.loadCounts(); err != nil {
				return true, err
			}
			l.batch, l.pending = batch, false
		}
		_, err := l.answer(key, l.counts[key]+1)
		l.pending = true
		return true, err
	}
	room := max(l.guess, 16)
	n, err := l.answer(key, room)
	if err == nil && n == room {
		var count int
		if count, err = l.count(key); err == nil {
			n, err = l.answer(key, count+1)
		}
	}
	if err != nil {
		return true, err
	}
	l.guess = 2 * n
	_, err = l.count(key)
	return true, err
}

// finish takes the last batch's second count.
func (l *legacyFloor) finish() error {
	if !l.pending {
		return nil
	}
	l.pending = false
	return l.loadCounts()
}

// answer asks for the destinations of the service key with room entries,
// each slot marked beforehand, and returns how many the kernel wrote.
func (l *legacyFloor) answer(key [16]byte, room int) (int, error) {
	n := 24 + room*legacyDestSize
	if cap(l.buf) < n {
		l.buf = make([]byte, n)
	}
	b := l.buf[:n]
	copy(b, key[:])
	ne.PutUint32(b[16:], uint32(room))
	for i := range room {
		ne.PutUint32(b[24+i*legacyDestSize+8:], 0xffffffff)
	}
	if err := l.get(soGetDests, b); err != nil {
		return 0, err
	}
	written := 0
	for written < room && ne.Uint32(b[24+written*legacyDestSize+8:]) != 0xffffffff {
		written++
	}
	return written, nil
}

func (l *legacyFloor) count(key [16]byte) (int, error) {
	var e [legacyServiceSize]byte
	copy(e[:], key[:])
	if err := l.get(soGetService, e[:]); err != nil {
		return 0, err
	}
	return int(ne.Uint32(e[44:])), nil
}

// loadCounts reads every IPv4 service's count of destinations from one
// IP_VS_SO_GET_SERVICES answer (bulk reads only).
func (l *legacyFloor) loadCounts() error {
	var info [12]byte
	if err := l.get(soGetInfo, info[:]); err != nil {
		return err
	}
	room := int(ne.Uint32(info[8:])) + 1
	b := make([]byte, 8+room*legacyServiceSize)
	ne.PutUint32(b, uint32(room))
	if err := l.get(soGetServices, b); err != nil {
		return err
	}
	l.counts = make(map[[16]byte]int, room)
	for i := range room - 1 {
		e := b[8+i*legacyServiceSize:][:legacyServiceSize]
		l.counts[[16]byte(e[:16])] = int(ne.Uint32(e[44:]))
	}
	return nil
}

func (l *legacyFloor) get(opt int, b []byte) error {
	n := uint32(len(b))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(l.fd), unix.IPPROTO_IP, uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return fmt.Errorf("getsockopt %d: %w", opt, errno)
	}
	return nil
}

// floorRestore sends pre-encoded batches (see encodeRestore), each ended by
// a NOOP barrier, and waits for every barrier. With a non-nil marks, it
// writes a line before each batch, "batch <index> <wall ns> <cpu ns>",
// the process's time since the start and its CPU time so far: where in
// a restore the kernel's time goes.
func (c *rawConn) floorRestore(batches [][]byte, marks io.Writer) error {
	start := time.Now()
	for i, b := range batches {
		if marks != nil {
			var ru unix.Rusage
			if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
				return err
			}
			fmt.Fprintf(marks, "batch %d %d %d\n", i, time.Since(start).Nanoseconds(), ru.Stime.Nano()+ru.Utime.Nano())
		}
		c.out = append(c.out[:0], b...)
		c.seq++
		var h [16]byte
		ne.PutUint32(h[0:], 16)
		ne.PutUint16(h[4:], nlmsgNoop)
		ne.PutUint16(h[6:], nlmFRequest|nlmFAck)
		ne.PutUint32(h[8:], c.seq)
		c.out = append(c.out, h[:]...)
		if err := c.exchange(false, nil); err != nil {
			return err
		}
	}
	return nil
}

// encodeRestore encodes tab's NEW_SERVICE and NEW_DEST requests, without
// acknowledgements, in batches, as libipvs lays out their attributes: a
// batch ends with the first request that takes it to limit bytes or more
// (floorBatchLimit keeps it under 64 KiB). Sequence numbers start above
// the ones used so far and stay below the barriers' (floorRestore numbers
// those after them).
func encodeRestore(c *rawConn, tab *table, limit int) [][]byte {
	var batches [][]byte
	var b []byte
	msg := func(cmd uint8, fill func([]byte) []byte) {
		start := len(b)
		var h [20]byte
		ne.PutUint16(h[4:], c.family)
		ne.PutUint16(h[6:], nlmFRequest)
		h[16], h[17] = cmd, 1
		b = append(b, h[:]...)
		b = fill(b)
		ne.PutUint32(b[start:], uint32(len(b)-start))
		if len(b) >= limit {
			batches = append(batches, b)
			b = nil
		}
	}
	for i := range tab.services {
		s := &tab.services[i]
		msg(cmdNewService, func(b []byte) []byte { return appendService(b, s) })
		for _, d := range s.dests {
			msg(cmdNewDest, func(b []byte) []byte {
				b = appendService(b, s)
				var nest []byte
				fam := uint16(unix.AF_INET)
				if d.Addr().Is6() {
					fam = unix.AF_INET6
				}
				nest = appendAttr(nest, 11, ne.AppendUint16(nil, fam)) // ADDR_FAMILY
				nest = appendAttr(nest, 1, addr16(d.Addr()))
				nest = appendAttr(nest, 2, binary.BigEndian.AppendUint16(nil, d.Port()))
				nest = appendAttr(nest, 3, ne.AppendUint32(nil, 0)) // masquerading
				nest = appendAttr(nest, 4, ne.AppendUint32(nil, 1)) // weight
				nest = appendAttr(nest, 13, []byte{0})
				nest = appendAttr(nest, 14, []byte{0, 0})
				nest = appendAttr(nest, 15, []byte{0, 0})
				nest = appendAttr(nest, 5, ne.AppendUint32(nil, 0))
				nest = appendAttr(nest, 6, ne.AppendUint32(nil, 0))
				return appendAttr(b, attrDest|nested, nest)
			})
		}
	}
	if len(b) > 0 {
		batches = append(batches, b)
	}
	return batches
}

// appendService appends the SERVICE nest of s as ipvsadm sends it.
func appendService(b []byte, s *service) []byte {
	var nest []byte
	fam := uint16(unix.AF_INET)
	if s.v6 {
		fam = unix.AF_INET6
	}
	nest = appendAttr(nest, 1, ne.AppendUint16(nil, fam))
	if s.fwmark != 0 {
		nest = appendAttr(nest, 5, ne.AppendUint32(nil, s.fwmark))
	} else {
		nest = appendAttr(nest, 2, ne.AppendUint16(nil, unix.IPPROTO_TCP))
		nest = appendAttr(nest, 3, addr16(s.addr.Addr()))
		nest = appendAttr(nest, 4, binary.BigEndian.AppendUint16(nil, s.addr.Port()))
	}
	nest = appendAttr(nest, 6, []byte("wlc\x00"))
	nest = appendAttr(nest, 7, []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	nest = appendAttr(nest, 8, ne.AppendUint32(nil, 0))
	if s.v6 {
		nest = appendAttr(nest, 9, ne.AppendUint32(nil, 128))
	} else {
		nest = appendAttr(nest, 9, []byte{0xff, 0xff, 0xff, 0xff})
	}
	return appendAttr(b, attrService|nested, nest)
}

func addr16(a netip.Addr) []byte {
	var raw [16]byte
	if a.Is4() {
		v := a.As4()
		copy(raw[:], v[:])
	} else if a.IsValid() {
		raw = a.As16()
	}
	return raw[:]
}

// Two knobs of a floor restore, for finding where its time goes
// (decision 0012); the benchmark sets neither.
const (
	// floorBatchEnv sets the size at which a restore's batch ends, in
	// bytes (default floorBatchLimit).
	floorBatchEnv = "LVSKIT_BENCH_BATCH"
	// floorMarksEnv, when not empty, makes a restore write its time
	// before each batch to standard error (see floorRestore).
	floorMarksEnv = "LVSKIT_BENCH_MARKS"
)

// floorBatchLimit is where a restore's batch ends, as our client's do
// (at most 64 KiB a sendmsg); smaller batches are slower (decision 0012).
const floorBatchLimit = 60 << 10

// floorChildEnv makes the test binary run one floor operation in its
// own namespace (the one it was started in) instead of the tests, and
// print the operation's time in nanoseconds: the floor is measured in a
// small fresh process, not inside the test's large heap.
const floorChildEnv = "LVSKIT_BENCH_FLOOR"

// floorChild runs the operation named by the environment: "list" (or
// "save"), "list-getsockopt" (the list as our client reads it),
// "list-getsockopt-bulk" (every count read at once, none after), "zero",
// "flush", or a table, "<layout>:<services>:<dests>", to restore (built
// and encoded before the clock starts). An optional ":buf=<bytes>" suffix
// sets the receive buffer size and makes a listing use that one socket
// only (without it, destination dumps go over a second socket with
// page-sized buffers, as ipvs.Open does).
func floorChild(spec string) int {
	// The floor is the kernel's cost: spare it what the Go runtime's
	// monitor takes from long system calls on one CPU, as our programs
	// are spared it (see sysenv.SpareProcessor).
	sysenv.SpareProcessor()
	bufSize, oneSocket := 32<<10, false
	if i := strings.LastIndex(spec, ":buf="); i >= 0 {
		n, err := strconv.Atoi(spec[i+5:])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		bufSize, spec, oneSocket = n, spec[:i], true
	}
	c, err := openRaw(bufSize)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		return 1
	}
	defer c.close()
	dests := c
	if !oneSocket {
		if dests, err = openRaw(min(os.Getpagesize(), 8192)); err != nil {
			fmt.Fprintln(os.Stderr, "floor:", err)
			return 1
		}
		defer dests.close()
	}
	var run func() error
	switch spec {
	case "list", "save":
		// Saving asks the kernel exactly what listing asks.
		run = func() error { return c.floorList(dests, nil) }
	case "list-getsockopt", "list-getsockopt-bulk":
		// What our listing asks: IPv4 services' destinations with the
		// kernel's getsockopt interface (see ipvs.Conn.EachDestinations);
		// or, -bulk, with every count read at once and none after.
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "floor:", err)
			return 1
		}
		defer unix.Close(fd)
		legacy := &legacyFloor{fd: fd, all: spec == "list-getsockopt-bulk"}
		run = func() error { return c.floorList(dests, legacy) }
	case "zero":
		run = func() error { return c.request(cmdZero, 0) }
	case "flush":
		run = func() error { return c.request(cmdFlush, 0) }
	default:
		tab, err := parseTableSpec(spec)
		if err != nil {
			fmt.Fprintln(os.Stderr, "floor:", err)
			return 2
		}
		limit := floorBatchLimit
		if v := os.Getenv(floorBatchEnv); v != "" {
			if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
				fmt.Fprintf(os.Stderr, "floor: %s=%q: want a size in bytes\n", floorBatchEnv, v)
				return 2
			}
		}
		var marks io.Writer
		if os.Getenv(floorMarksEnv) != "" {
			marks = os.Stderr
		}
		batches := encodeRestore(c, tab, limit)
		run = func() error { return c.floorRestore(batches, marks) }
	}
	start := time.Now()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		return 1
	}
	fmt.Println(time.Since(start).Nanoseconds())
	return 0
}
