package ipvsadm

// This file holds the pipelined restore engine: ipvsadm -R as ipvsadm
// 1.31's one-line-at-a-time restore prints and exits (RestoreSequential,
// which stays the reference for tests), but with the changes sent through
// one netlink socket with many requests in flight and the input read as a
// stream.

import (
	"os"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
)

// DefaultWindow is how many changes Pipelined keeps in flight. The kernel
// handles the requests of one socket in order, so the window only bounds
// the memory held for unanswered lines and the size of the socket's queues:
// the error answers of 256 failing requests fit the receive buffer package
// ipvs asks for, with room to spare.
const DefaultWindow = 256

// Pipelined returns a restore engine that keeps up to window changes
// (window < 1 means DefaultWindow) in flight on p.Client.
//
// Its output is the sequential engine's, byte for byte and in the same
// order: every line is parsed as soon as it is read; a change is submitted
// to the kernel and its answer, delivered in submission order, prints the
// line's kernel error if any; before anything whose effect or output must
// come after the earlier lines' answers (a line that fails to parse, a
// listing, -h, -v, a nested -R, the end of input) the engine waits for all
// answers. The restore's status is the last line's, as in ipvsadm.
//
// Memory stays bounded: lines are read one at a time and at most window
// lines wait for their answers.
func Pipelined(window int) RestoreEngine {
	return Tracked(window, nil)
}

// Progress follows one restore for the wrapper script: how far it got,
// which lines failed, and a request to stop early. Line numbers count the
// lines of the restore's input from 1.
type Progress struct {
	// Interrupt, when it delivers a signal, ends the restore before the
	// next line is read, after the answers to every line already read:
	// the table then holds the changes of lines 1..Read (less the lines
	// that failed). It is polled once per line.
	Interrupt <-chan os.Signal
	// Caught is the signal that ended the restore, nil if none did.
	Caught os.Signal
	// Read is the number of lines read and run (or submitted): after the
	// restore, every one of them has been answered.
	Read int
	// Failed lists the first maxFailedLines lines that did not succeed;
	// Failures counts them all. -h and -v lines print and end the restore
	// (see Read); they do not fail.
	Failed   []int
	Failures int
}

// maxFailedLines bounds Progress.Failed: a report names the first ones.
const maxFailedLines = 20

func (pr *Progress) fail(line int) {
	pr.Failures++
	if len(pr.Failed) < maxFailedLines {
		pr.Failed = append(pr.Failed, line)
	}
}

// Tracked is Pipelined reporting to pr (nil: no report). Output and status
// are Pipelined's, except that a restore pr.Interrupt ends early ends with
// the outcome of the last line run.
func Tracked(window int, pr *Progress) RestoreEngine {
	if window < 1 {
		window = DefaultWindow
	}
	return func(p *Program, prog string) cmdline.Outcome {
		e := &engine{p: p, pipe: p.Client.Pipeline(window), progress: pr}
		// The line being submitted joins the queue before Submit waits
		// for room in the window.
		e.queue.buf = make([]queued, window+1)
		e.done = e.answer // one function value for every request
		return e.run(prog)
	}
}

// engine is one pipelined restore.
type engine struct {
	p *Program
	// pipe is nil once the transport failed: later lines go through
	// p.Client.Exec one at a time, which reports the failure for each line
	// as the sequential engine would.
	pipe ipvs.Pipeline
	// queue holds the lines whose changes await an answer. The pipeline
	// answers in submission order, so an answer belongs to the oldest.
	queue fifo
	// done is e.answer, made once: a method value allocates.
	done func(error)
	// last is how the last line that ran ended; the restore's status.
	last cmdline.Kind
	// req holds what the request being submitted points to: pipelines do
	// not keep requests, so one buffer serves every line.
	req cmdline.RequestBuffer
	// progress, if not nil, is told about every line; lineNo counts the
	// lines read.
	progress *Progress
	lineNo   int
}

func (e *engine) run(prog string) cmdline.Outcome {
	lines := NewRestoreReader(e.p.Stdin)
	e.last = cmdline.Success
	var fast cmdline.Invocation // reused: ParseFast does not allocate
	// The lines of a saved file that differ from the last one of their
	// kind ParseFast read only in their addresses are read with these.
	var dests, svcs cmdline.LineTemplate
	for {
		if e.interrupted() {
			break
		}
		if inv, ok := lines.NextLike(&dests, &svcs); ok {
			e.lineNo++
			if e.progress != nil {
				e.progress.Read = e.lineNo
			}
			req, _ := inv.RequestIn(&e.req)
			e.submit(inv.Command, req)
			continue
		}
		fields, ok := lines.NextFields()
		if !ok {
			break
		}
		e.lineNo++
		if e.progress != nil {
			e.progress.Read = e.lineNo
		}
		if len(fields) == 0 {
			continue // no tokens: ipvsadm skips the line
		}
		if cmdline.ParseFast(fields, &fast) {
			if fast.Command == cmdline.CmdAddService {
				svcs.Set(lines.Line(), fields, &fast)
			} else {
				dests.Set(lines.Line(), fields, &fast)
			}
			req, _ := fast.RequestIn(&e.req)
			e.submit(fast.Command, req)
			continue
		}
		if o, stop := e.line(cmdline.RestoreArgv(prog, fields)); stop {
			return o
		}
	}
	e.flush()
	return cmdline.Outcome{Kind: e.last}
}

// interrupted polls the progress's interrupt channel.
func (e *engine) interrupted() bool {
	if e.progress == nil || e.progress.Interrupt == nil {
		return false
	}
	select {
	case s := <-e.progress.Interrupt:
		e.progress.Caught = s
		return true
	default:
		return false
	}
}

// line runs one command line. It reports the restore's outcome and true
// when the line ends the restore.
func (e *engine) line(argv []string) (cmdline.Outcome, bool) {
	inv, ended := e.p.Parse(argv)
	if ended == nil {
		if req, ok := inv.RequestIn(&e.req); ok {
			e.submit(inv.Command, req)
			return cmdline.Outcome{}, false
		}
	}
	// Everything else reads the tables or prints: the earlier changes must
	// be done and their messages printed first.
	e.flush()
	var o cmdline.Outcome
	if ended != nil {
		o = *ended
	} else {
		// Listings, -S, and a nested -R, which Execute refuses while a
		// restore runs.
		o = e.p.Execute(inv)
	}
	e.p.Print(o)
	e.last = o.Kind
	if o.Kind != cmdline.Success && o.Kind != cmdline.Informational && e.progress != nil {
		e.progress.fail(e.lineNo)
	}
	if o.Terminates() {
		return cmdline.Outcome{Kind: o.Kind}, true
	}
	return cmdline.Outcome{}, false
}

// submit sends the change of one line (command cmd), or runs it directly
// once the pipeline is broken.
func (e *engine) submit(cmd cmdline.Command, req ipvs.Request) {
	if e.pipe == nil {
		e.finish(queued{cmd, e.lineNo}, e.p.Client.Exec(req))
		return
	}
	e.queue.push(queued{cmd, e.lineNo})
	if err := e.pipe.Submit(req, e.done); err != nil {
		e.broken(err)
	}
}

// answer receives the kernel's answer for the oldest unanswered line.
func (e *engine) answer(err error) {
	if e.queue.n == 0 {
		return // an answer nobody waits for: the pipeline broke its contract
	}
	e.finish(e.queue.pop(), err)
}

// finish prints a line's kernel error, if any, and records how it ended.
func (e *engine) finish(q queued, err error) {
	o := changeOutcome(q.cmd, err)
	e.p.Print(o)
	e.last = o.Kind
	if o.Kind != cmdline.Success && e.progress != nil {
		e.progress.fail(q.line)
	}
}

// flush waits for every outstanding answer.
func (e *engine) flush() {
	if e.pipe == nil {
		return
	}
	if err := e.pipe.Flush(); err != nil {
		e.broken(err)
	}
}

// broken handles a transport failure: the pipeline has answered what it
// could with the error; lines it no longer answers get the error too, and
// later lines go one at a time through the client.
func (e *engine) broken(err error) {
	for e.queue.n > 0 {
		e.answer(err)
	}
	e.pipe = nil
}

// queued is a line awaiting its answer: its command (all the answer's
// message depends on) and its number.
type queued struct {
	cmd  cmdline.Command
	line int
}

// fifo is a ring of the lines awaiting answers. It grows only if a
// pipeline holds more requests than its window promised.
type fifo struct {
	buf     []queued
	head, n int
}

func (q *fifo) push(cmd queued) {
	if q.n == len(q.buf) {
		grown := make([]queued, 2*len(q.buf)+1)
		for i := range q.n {
			grown[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = cmd
	q.n++
}

func (q *fifo) pop() queued {
	cmd := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return cmd
}
