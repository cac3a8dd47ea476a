package ipvs

// The changes: Exec, and the pipeline that sends many requests per call.

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

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
