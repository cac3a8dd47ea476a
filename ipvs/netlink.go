package ipvs

import (
	"errors"
	"fmt"
	"slices"

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

// Info returns what GET_INFO reported when the connection was opened.
func (c *Conn) Info() (Info, error) {
	if c.sock == nil {
		return Info{}, &OpError{Op: CmdGetInfo, Err: unix.EBADF}
	}
	return c.info, nil
}

// Services lists every service with one GET_SERVICE dump.
func (c *Conn) Services() ([]ServiceEntry, error) {
	var err error
	c.svcs, err = c.AppendServices(c.svcs[:0])
	if err != nil || len(c.svcs) == 0 {
		return nil, err
	}
	return slices.Clone(c.svcs), nil
}

// AppendServices appends every service to dst with one GET_SERVICE dump
// and returns the extended slice (dst unchanged on error).
func (c *Conn) AppendServices(dst []ServiceEntry) ([]ServiceEntry, error) {
	n := len(dst)
	err := c.query(CmdGetService, nlmFDump, nil, func(a *attrs) error {
		dst = append(dst, ServiceEntry{})
		if !decodeService(a[cmdAttrService], &dst[len(dst)-1], !c.noStats) {
			return errMalformed
		}
		return nil
	})
	if err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// DumpServices calls fn with every service, in dump order, with one
// GET_SERVICE dump; the *Service is reused and valid only during the call.
// After fn fails it is not called again, and its error is returned once
// the dump is over.
func (c *Conn) DumpServices(fn func(*ServiceEntry) error) error {
	var s ServiceEntry
	return c.query(CmdGetService, nlmFDump, nil, func(a *attrs) error {
		if !decodeService(a[cmdAttrService], &s, !c.noStats) {
			return errMalformed
		}
		return fn(&s)
	})
}

// Service fetches one service with a GET_SERVICE request; the kernel
// answers ESRCH when it does not exist.
func (c *Conn) Service(key Service) (ServiceEntry, error) {
	id := Service{Family: key.Family, Protocol: key.Protocol, Addr: key.Addr, Port: key.Port, FWMark: key.FWMark}
	var s ServiceEntry
	found := false
	err := c.query(CmdGetService, 0, func(m *builder) { m.service(&id) }, func(a *attrs) error {
		if !decodeService(a[cmdAttrService], &s, !c.noStats) {
			return errMalformed
		}
		found = true
		return nil
	})
	if err == nil && !found {
		err = &OpError{Op: CmdGetService, Err: errMalformed}
	}
	return s, err
}

// SkipStats makes later listings leave the 64-bit Stats zero (skip false:
// read them again). The connection counts are still read. Decoding the
// counters is a third of a destination's decoding, and saving, planning
// and most listings never look at them. It returns the previous setting.
func (c *Conn) SkipStats(skip bool) (was bool) {
	was, c.noStats = c.noStats, skip
	return was
}

// Destinations lists a service's destinations with a GET_DEST dump. The
// request names the service by family and fwmark or protocol, address and
// port only, as ipvsadm does. A missing service yields an empty list, as
// the kernel ends such a dump without an error.
func (c *Conn) Destinations(svc Service) ([]DestinationEntry, error) {
	var err error
	c.dests, err = c.AppendDestinations(c.dests[:0], &svc)
	if err != nil || len(c.dests) == 0 {
		return nil, err
	}
	return slices.Clone(c.dests), nil
}

// AppendDestinations appends svc's destinations to dst with one GET_DEST
// dump and returns the extended slice (dst unchanged on error). While
// SkipStats is on, an IPv4 service's destinations are read with the
// kernel's getsockopt interface instead when its answer is complete (see
// appendDestsLegacy): they are the same, except that tunnel settings of
// destinations that are not tunnelled read as zero.
//
// The dump goes over the Conn's second socket while services stay small
// (see openDumpSocket). A service that outgrows it is read again over the
// main socket, and so is every later one: the kernel resumes a dump by
// skipping the entries it already sent, so small datagrams would make a
// service of many thousands of destinations cost quadratic time.
func (c *Conn) AppendDestinations(dst []DestinationEntry, svc *Service) ([]DestinationEntry, error) {
	if err := c.broken(CmdGetDest); err != nil {
		return dst, err
	}
	if d, ok := c.appendDestsLegacy(dst, svc); ok {
		return d, nil
	}
	n := len(dst)
	build := func(m *builder) {
		nest := m.nest(cmdAttrService)
		m.serviceIdentity(svc)
		m.endNest(nest)
	}
	decode := func(a *attrs) error {
		dst = append(dst, DestinationEntry{})
		if !decodeDest(a[cmdAttrDest], svc.Family, &dst[len(dst)-1], !c.noStats) {
			return errMalformed
		}
		return nil
	}
	if c.dumps != nil {
		err := c.queryOn(c.dumps, c.dumpsPort, smallDumpLimit, CmdGetDest, nlmFDump, build, decode)
		if !errors.Is(err, errOutgrew) {
			if err != nil {
				return dst[:n], err
			}
			return dst, nil
		}
		// Its dump is abandoned in the middle: the socket goes with it.
		c.dumps.close()
		c.dumps = nil
		dst = dst[:n]
	}
	if err := c.query(CmdGetDest, nlmFDump, build, decode); err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// smallDumpLimit is how many datagrams a destination dump may take over
// the second socket before the service counts as large: about 500
// destinations of 4 KiB datagrams.
const smallDumpLimit = 64

// errOutgrew ends a dump that took more datagrams than its limit.
var errOutgrew = errors.New("dump larger than its limit")

// Timeouts reads the tcp, tcpfin and udp timeouts with GET_CONFIG.
func (c *Conn) Timeouts() (Timeouts, error) {
	var t Timeouts
	err := c.query(CmdGetConfig, 0, nil, func(a *attrs) error {
		t.TCP = uint32(uintAttr(a[cmdAttrTimeoutTCP]))
		t.TCPFin = uint32(uintAttr(a[cmdAttrTimeoutFin]))
		t.UDP = uint32(uintAttr(a[cmdAttrTimeoutUDP]))
		return nil
	})
	return t, err
}

// Daemons lists the running sync daemons with a GET_DAEMON dump.
func (c *Conn) Daemons() ([]Daemon, error) {
	var out []Daemon
	err := c.query(CmdGetDaemon, nlmFDump, nil, func(a *attrs) error {
		var d Daemon
		if !decodeDaemon(a[cmdAttrDaemon], &d) {
			return errMalformed
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Exec sends one change and waits for the kernel's acknowledgement.
func (c *Conn) Exec(req Request) error {
	p := &c.single
	if p.c == nil {
		// One request: its own acknowledgement is cheaper than a barrier.
		*p = pipeline{c: c, window: 1, ackEach: true}
		c.onResult = func(err error) { c.result = err }
	}
	c.result = nil
	if err := p.Submit(req, c.onResult); err != nil {
		return err
	}
	if err := p.Flush(); err != nil {
		return err
	}
	return c.result
}

// Pipeline returns a pipeline with at most window unanswered requests
// (window < 1 means 1). Requests are sent in batches of up to window
// messages per system call. Changes go without NLM_F_ACK: the kernel then
// answers only those that fail, and a NOOP barrier at the end of each
// batch tells when the others are done (see docs/decisions). Do not call
// other Conn methods while a pipeline has unanswered requests.
func (c *Conn) Pipeline(window int) Pipeline {
	if window < 1 {
		window = 1
	}
	return &pipeline{c: c, window: window}
}

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

// Conn hands out dumps without an allocation per call.
var _ Dumper = (*Conn)(nil)

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

// pipeline implements Pipeline on a Conn.
type pipeline struct {
	c      *Conn
	window int
	ring   []pending // unanswered requests in order; sent ones first
	head   int       // index of the oldest unanswered request in ring
	n      int       // number of unanswered requests (and barriers)
	unsent int       // the last unsent requests are encoded in c.tx
	lastOp Op        // names the operation in a transport error
	err    error
	// ackEach asks for an acknowledgement of every request instead of
	// quiet requests followed by a barrier.
	ackEach bool
}

type pending struct {
	seq     uint32
	op      Op
	done    func(error)
	barrier bool // a NOOP sent only to learn that the requests before it ended
	// quiet requests were sent without NLM_F_ACK: the kernel answers them
	// only with an error, and an answer to a later message means success.
	quiet bool
}

// maxBatch bounds one sendmsg: the kernel refuses datagrams larger than
// the socket's send buffer (about 200 KiB by default).
const maxBatch = 64 << 10

// nlmsgNoop is NLMSG_NOOP. The kernel acknowledges it without doing
// anything, which makes it a barrier: see mayGoUnanswered.
const nlmsgNoop = 1

// mayGoUnanswered reports whether the kernel may process a request without
// answering it even though it asked for an acknowledgement. netlink treats
// a handler's -EINTR as "dump in progress" and sends nothing; stopping a
// sync daemon whose thread has not run yet returns exactly that (the
// thread is stopped all the same). A NOOP barrier after such a request
// makes the missing answer visible instead of a wait until the timeout.
func mayGoUnanswered(op Op) bool {
	return op == CmdDelDaemon || op == CmdNewDaemon
}

// ErrNoAnswer is wrapped (with unix.EINTR) in the error of a request the
// kernel processed without answering: its handler returned EINTR, which
// netlink swallows. For CmdDelDaemon this means the daemon was stopped
// before its thread ever ran.
var ErrNoAnswer = errors.New("the kernel processed the request but sent no answer")

func (p *pipeline) Submit(req Request, done func(error)) error {
	if p.err != nil {
		return p.err
	}
	c := p.c
	p.lastOp = req.Cmd
	if err := c.broken(req.Cmd); err != nil {
		p.err = err
		return err
	}
	if !req.Cmd.Writes() {
		// Not a change: answer locally, in order, like any other request.
		return p.enqueueLocal(req.Cmd, done)
	}
	if p.ring == nil {
		// One spare slot for a barrier.
		p.ring = make([]pending, p.window+1)
		c.tx.b = c.tx.b[:0]
	}
	for p.n >= p.window {
		if err := p.sendBatch(); err != nil {
			return err
		}
		if err := p.receive(); err != nil {
			return err
		}
	}
	seq := c.nextSeq()
	// A request the kernel may leave unanswered keeps its acknowledgement
	// and gets a barrier: a quiet one would look like a success.
	unanswerable := mayGoUnanswered(req.Cmd)
	quiet := !p.ackEach && !unanswerable
	flags := uint16(nlmFRequest | nlmFAck)
	if quiet {
		flags = nlmFRequest
	}
	c.tx.request(c.family, flags, seq, &req)
	p.push(pending{seq: seq, op: req.Cmd, done: done, quiet: quiet})
	if unanswerable {
		p.pushBarrier(req.Cmd)
	}
	if len(c.tx.b) >= maxBatch {
		return p.sendBatch()
	}
	return nil
}

// pushBarrier queues a NLMSG_NOOP with NLM_F_ACK. The kernel handles a
// socket's messages in order and acknowledges the NOOP without doing
// anything, so its answer means every earlier request has been handled.
func (p *pipeline) pushBarrier(op Op) {
	c := p.c
	seq := c.nextSeq()
	c.tx.begin(nlmsgNoop, nlmFRequest|nlmFAck, seq, 0, 0)
	c.tx.b = c.tx.b[:len(c.tx.b)-genlHdrLen] // a bare netlink header
	c.tx.end()
	p.push(pending{seq: seq, op: op, barrier: true})
}

func (p *pipeline) push(e pending) {
	p.ring[(p.head+p.n)%len(p.ring)] = e
	p.n++
	p.unsent++
}

// pop removes the oldest entry and answers it (barriers have no one to
// answer).
func (p *pipeline) pop(result error) {
	head := &p.ring[p.head]
	done, barrier := head.done, head.barrier
	*head = pending{}
	p.head = (p.head + 1) % len(p.ring)
	p.n--
	if done != nil && !barrier {
		done(result)
	}
}

// enqueueLocal answers a request Exec does not accept with EINVAL once
// every earlier request has been answered, keeping answers in order.
func (p *pipeline) enqueueLocal(op Op, done func(error)) error {
	if err := p.Flush(); err != nil {
		return err
	}
	if done != nil {
		done(&OpError{Op: op, Err: unix.EINVAL})
	}
	return nil
}

func (p *pipeline) Flush() error {
	if p.err != nil {
		return p.err
	}
	if err := p.sendBatch(); err != nil {
		return err
	}
	for p.n > 0 {
		if err := p.receive(); err != nil {
			return err
		}
	}
	return nil
}

// sendBatch sends the encoded but unsent requests in one datagram, ended
// by a barrier when its last request is quiet.
func (p *pipeline) sendBatch() error {
	if p.unsent == 0 {
		return nil
	}
	if last := p.ring[(p.head+p.n-1)%len(p.ring)]; last.quiet {
		p.pushBarrier(last.op)
	}
	c := p.c
	err := c.sock.send(c.tx.b)
	c.tx.b = c.tx.b[:0]
	p.unsent = 0
	if err != nil {
		return p.abort(err)
	}
	return nil
}

// receive delivers the answers of at least one sent request.
func (p *pipeline) receive() error {
	c := p.c
	dgrams, err := c.sock.recv(recvMany)
	if err != nil {
		return p.abort(err)
	}
	for _, d := range dgrams {
		for len(d) > 0 {
			h, payload, rest, ok := nextMessage(d)
			if !ok {
				return p.abort(errMalformed)
			}
			d = rest
			if h.pid != c.port {
				continue // not addressed to this socket
			}
			if p.n == 0 || int32(h.seq-p.ring[p.head].seq) < 0 {
				continue // a late answer to an abandoned request
			}
			// The kernel answers in order, so an answer to a later message
			// means the earlier ones were processed: quiet requests
			// succeeded, others went without the answer they asked for.
			skipped := -1
			for i := 0; i < p.n-p.unsent; i++ {
				if p.ring[(p.head+i)%len(p.ring)].seq == h.seq {
					skipped = i
					break
				}
			}
			if skipped < 0 {
				return p.abort(fmt.Errorf("%w: sequence %d while waiting for %d", errOutOfStep, h.seq, p.ring[p.head].seq))
			}
			for range skipped {
				if p.ring[p.head].quiet {
					p.pop(nil) // no news is good news
					continue
				}
				op := p.ring[p.head].op
				p.pop(&OpError{Op: op, Err: fmt.Errorf("%w (its handler returned EINTR): %w", ErrNoAnswer, unix.EINTR)})
			}
			if h.typ != nlmsgError {
				return p.abort(fmt.Errorf("%w: message type %d where an acknowledgement was due", errOutOfStep, h.typ))
			}
			code, ok := errorCode(payload)
			if !ok {
				return p.abort(errMalformed)
			}
			var result error
			if code != 0 {
				result = &OpError{Op: p.ring[p.head].op, Err: code}
			}
			p.pop(result)
		}
	}
	return nil
}

// abort breaks the pipeline and its connection: every unanswered request
// is answered with the transport error, which is then returned.
func (p *pipeline) abort(cause error) error {
	c := p.c
	c.fail(cause)
	p.err = &OpError{Op: p.lastOp, Err: cause}
	for p.n > 0 {
		p.pop(&OpError{Op: p.ring[p.head].op, Err: cause})
	}
	p.unsent = 0
	c.tx.b = c.tx.b[:0]
	return p.err
}
