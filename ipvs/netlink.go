package ipvs

// The connection: Conn, its transport, and one request's round trip.

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Conn is a generic netlink connection to the IPVS family of the network
// namespace it was opened in. It implements Client. Every call runs on the
// calling goroutine with blocking system calls; nothing runs in the
// background. A Conn is not safe for concurrent use.
type Conn struct {
	sock   transport
	family uint16 // generic netlink id of "IPVS"
	port   uint32 // our netlink port id; the kernel addresses answers to it
	seq    uint32
	info   Info
	tx     builder
	err    error // a broken transport: every later call fails with it

	// Decoding scratch, reused so a listing allocates one exactly sized
	// slice per call.
	svcs  []ServiceEntry
	dests []DestinationEntry
	attrs attrs
	// noStats leaves Stats zero in listings (see SkipStats).
	noStats bool

	// dumps, when not nil, carries destination dumps: a second socket
	// with page-sized receive buffers (see openDumpSocket), port dumpsPort.
	// Set to nil for good when a service outgrows it (more than
	// smallDumpLimit datagrams): its dumps then go over sock.
	dumps     transport
	dumpsPort uint32

	// legacy, when not nil, reads IPv4 services' destinations with the
	// kernel's getsockopt interface while SkipStats is on (see
	// appendDestsLegacy); legacyBuf is its reused argument and answer
	// buffer, legacyReads counts the services it read.
	legacy      legacyTransport
	legacyBuf   []byte
	legacyReads int
	// legacyGuess is the room the next destinations request offers:
	// twice what the last service had.
	legacyGuess int
	// legacyBulkCounts counts the IP_VS_SO_GET_SERVICES answers taken
	// for batches (see EachDestinations).
	legacyBulkCounts int

	// replyDatagrams counts the datagrams of the last request that carried
	// answers (see ReplyDatagrams).
	replyDatagrams int

	// Exec's one-request pipeline, kept to spare allocations.
	single   pipeline
	onResult func(error)
	result   error
}

// transport moves netlink datagrams between a Conn and the kernel. The
// Linux socket implements it; host tests substitute an in-memory kernel.
type transport interface {
	// send hands one datagram (one or more messages) to the kernel.
	send(b []byte) error
	// recv blocks until at least one datagram is available (or the
	// receive timeout passes) and returns up to max datagrams, each a slice
	// of the transport's own buffers valid until the next recv. max is 1
	// when the caller expects large dump datagrams.
	recv(max int) ([][]byte, error)
	close() error
}

// How many datagrams one recv may return: a pipeline drains many small
// acknowledgements per system call; a query takes a few large dump
// datagrams (the transport keeps that many large buffers).
const (
	recvMany  = 64
	recvQuery = 4
)

// Close releases the socket. Calling it again does nothing.
func (c *Conn) Close() error {
	if c.sock == nil {
		return nil
	}
	err := c.sock.close()
	c.sock = nil
	if c.dumps != nil {
		c.dumps.close()
		c.dumps = nil
	}
	if c.legacy != nil {
		c.legacy.close()
		c.legacy = nil
	}
	if c.err == nil {
		c.err = unix.EBADF
	}
	return err
}

// errMalformed reports a kernel answer this package cannot decode.
var errMalformed = errors.New("malformed netlink answer")

func (c *Conn) nextSeq() uint32 {
	c.seq++
	return c.seq
}

// broken reports whether the connection can no longer be used.
func (c *Conn) broken(op Op) error {
	if c.err != nil {
		return &OpError{Op: op, Err: c.err}
	}
	return nil
}

// fail marks the transport broken after a failure that leaves the
// conversation with the kernel out of step (timeouts, lost messages).
func (c *Conn) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// query sends one IPVS read request (a dump when flags has nlmFDump) and
// hands the top-level attributes of every reply message to each.
func (c *Conn) query(op Op, flags uint16, build func(*builder), each func(*attrs) error) error {
	return c.queryOn(c.sock, c.port, 0, op, flags, build, each)
}

// queryOn is query over transport t, whose answers come addressed to
// port; with limit > 0 it ends with errOutgrew after limit datagrams
// without reading the rest (t is then out of step and must be closed).
func (c *Conn) queryOn(t transport, port uint32, limit int, op Op, flags uint16, build func(*builder), each func(*attrs) error) error {
	if err := c.broken(op); err != nil {
		return err
	}
	seq := c.nextSeq()
	m := &c.tx
	m.b = m.b[:0]
	m.begin(c.family, nlmFRequest|nlmFAck|flags, seq, uint8(op), ipvsGenlVersion)
	if build != nil {
		build(m)
	}
	m.end()
	return c.roundTrip(t, port, limit, op, seq, c.family, flags&nlmFDump != 0, m.b, func(payload []byte) error {
		a := &c.attrs
		if len(payload) < genlHdrLen || !a.parse(payload[genlHdrLen:]) {
			return errMalformed
		}
		return each(a)
	})
}

// roundTrip sends msg (sequence number seq) over t and reads answers
// until the request is complete: NLMSG_DONE for a dump, the
// acknowledgement otherwise. Messages of type want go to onReply. A kernel
// error comes back as an *OpError wrapping the unix.Errno. With limit > 0,
// more than limit datagrams end it with errOutgrew (see queryOn).
func (c *Conn) roundTrip(t transport, port uint32, limit int, op Op, seq uint32, want uint16, dump bool, msg []byte, onReply func([]byte) error) error {
	if err := t.send(msg); err != nil {
		c.fail(err)
		return &OpError{Op: op, Err: err}
	}
	var replyErr error
	received := 0
	c.replyDatagrams = 0
	for {
		dgrams, err := t.recv(recvQuery)
		if err != nil {
			c.fail(err)
			return &OpError{Op: op, Err: err}
		}
		if received += len(dgrams); limit > 0 && received > limit {
			return errOutgrew
		}
		for _, d := range dgrams {
			answered := false
			for len(d) > 0 {
				h, payload, rest, ok := nextMessage(d)
				if !ok {
					c.fail(errMalformed)
					return &OpError{Op: op, Err: errMalformed}
				}
				d = rest
				if h.pid != port {
					continue // not addressed to this socket
				}
				if h.seq != seq {
					if int32(h.seq-seq) < 0 {
						continue // a late answer to an abandoned request
					}
					c.fail(errOutOfStep)
					return &OpError{Op: op, Err: fmt.Errorf("%w: sequence %d while waiting for %d", errOutOfStep, h.seq, seq)}
				}
				switch h.typ {
				case nlmsgError:
					code, ok := errorCode(payload)
					if !ok {
						c.fail(errMalformed)
						return &OpError{Op: op, Err: errMalformed}
					}
					if code != 0 {
						return &OpError{Op: op, Err: code}
					}
					if !dump {
						if replyErr != nil {
							return &OpError{Op: op, Err: replyErr}
						}
						return nil
					}
				case nlmsgDone:
					if code, ok := errorCode(payload); ok && code != 0 {
						return &OpError{Op: op, Err: code}
					}
					if replyErr != nil {
						return &OpError{Op: op, Err: replyErr}
					}
					return nil
				case want:
					if !answered {
						answered = true
						c.replyDatagrams++
					}
					if replyErr == nil {
						replyErr = onReply(payload)
					}
				}
			}
		}
	}
}

// ReplyDatagrams reports how many datagrams carried the answers to the
// last request. The kernel fills each datagram of a dump under its lock
// and resumes the next one by position, so a dump whose answers came in
// one datagram is a snapshot, and one in several may have skipped or
// repeated an entry that another program added or deleted in between.
func (c *Conn) ReplyDatagrams() int { return c.replyDatagrams }

// errOutOfStep reports an answer to a request this connection never sent.
var errOutOfStep = errors.New("netlink answer out of sequence")

type msgHeader struct {
	length uint32
	typ    uint16
	flags  uint16
	seq    uint32
	pid    uint32
}

// nextMessage splits the first netlink message off a datagram.
func nextMessage(d []byte) (h msgHeader, payload, rest []byte, ok bool) {
	if len(d) < nlmsgHdrLen {
		return h, nil, nil, false
	}
	h = msgHeader{
		length: native.Uint32(d),
		typ:    native.Uint16(d[4:]),
		flags:  native.Uint16(d[6:]),
		seq:    native.Uint32(d[8:]),
		pid:    native.Uint32(d[12:]),
	}
	if h.length < nlmsgHdrLen || int(h.length) > len(d) {
		return h, nil, nil, false
	}
	next := (int(h.length) + 3) &^ 3
	if next > len(d) {
		next = len(d)
	}
	return h, d[nlmsgHdrLen:h.length], d[next:], true
}

// errorCode decodes the error of an NLMSG_ERROR (or NLMSG_DONE) payload:
// 0 for an acknowledgement, else the errno.
func errorCode(payload []byte) (unix.Errno, bool) {
	if len(payload) < 4 {
		return 0, false
	}
	code := int32(native.Uint32(payload))
	if code > 0 {
		return 0, false
	}
	return unix.Errno(-code), true
}

// resolveFamily asks the generic netlink controller for the id of "IPVS".
// A kernel without the family answers ENOENT; that is reported as
// ENOPROTOOPT, which is what ipvsadm shows ("Protocol not available") once
// its fallbacks fail too.
func (c *Conn) resolveFamily(name string) error {
	seq := c.nextSeq()
	m := &c.tx
	m.b = m.b[:0]
	m.begin(genlIDCtrl, nlmFRequest|nlmFAck, seq, ctrlCmdGetFm, 1)
	m.str(ctrlAttrName, name)
	m.end()
	var id uint16
	err := c.roundTrip(c.sock, c.port, 0, CmdGetInfo, seq, genlIDCtrl, false, m.b, func(payload []byte) error {
		var a attrs
		if len(payload) < genlHdrLen || !a.parse(payload[genlHdrLen:]) || len(a[ctrlAttrID]) < 2 {
			return errMalformed
		}
		id = native.Uint16(a[ctrlAttrID])
		return nil
	})
	if errors.Is(err, unix.ENOENT) {
		return &OpError{Op: CmdGetInfo, Err: fmt.Errorf("no generic netlink family %q (is the ip_vs module loaded?): %w", name, unix.ENOPROTOOPT)}
	}
	if err != nil {
		return err
	}
	if id == 0 {
		return &OpError{Op: CmdGetInfo, Err: errMalformed}
	}
	c.family = id
	return nil
}

// loadInfo runs GET_INFO and caches the answer.
func (c *Conn) loadInfo() error {
	got := false
	err := c.query(CmdGetInfo, 0, nil, func(a *attrs) error {
		if a[infoAttrVersion] == nil || a[infoAttrConnTabSize] == nil {
			return errMalformed
		}
		c.info = Info{
			Version:     uint32(uintAttr(a[infoAttrVersion])),
			ConnTabSize: uint32(uintAttr(a[infoAttrConnTabSize])),
		}
		got = true
		return nil
	})
	if err == nil && !got {
		err = &OpError{Op: CmdGetInfo, Err: errMalformed}
	}
	return err
}

// start resolves the family and reads the IPVS info: what every ipvsadm
// run does before looking at its arguments.
func (c *Conn) start(family string) error {
	if err := c.resolveFamily(family); err != nil {
		return err
	}
	return c.loadInfo()
}
