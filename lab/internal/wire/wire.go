// Package wire is the contract between the lab's host and guest sides.
//
// The host side is package lab/vm, the guest side lab/guestinit: it holds
// the plan the guest executes and the records it sends back over the results
// serial port.
//
// The results channel is the VM's second serial port (ttyS1), set to raw
// mode in the guest and connected to QEMU's stdout on the host, so it carries
// bytes exactly; the kernel console (ttyS0) goes elsewhere. Every record
// starts with a header line "\x01LAB <kind> <fields...>\n"; "out" and "err"
// records are followed by exactly n payload bytes, which keeps program output
// byte-exact (partial lines, no CRLF translation).
package wire

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// PlanPath is where the guest finds the plan, as JSON.
const PlanPath = "/etc/lab/plan.json"

// ModulesPath lists the kernel modules the guest loads before running the
// plan, one "path [params]" per line, in load order.
const ModulesPath = "/etc/lab/modules.order"

// Plan is what one boot executes: its steps, in order, or, when
// Interactive is set, in the order the host asks for them: the guest then
// reads commands from the results port after its ready record, "run <i>"
// to run step i and "done" to finish. That lets several VMs share one
// queue of steps.
type Plan struct {
	Steps       []Step
	Interactive bool
}

// Commands the host sends to an interactive guest, one per line.
const (
	CmdRun  = "run"
	CmdDone = "done"
)

// Step is one program run inside the guest.
type Step struct {
	Name string   // shown in reports
	Argv []string // Argv[0] is the program path
	Dir  string   // working directory
	Env  []string // added to (and overriding) the guest's base environment
	// TimeoutSec bounds the step; the guest kills its process group after.
	TimeoutSec int
}

// Record kinds.
const (
	KindInit  = "init"  // guest /init started: the boot worked; fields: uptime
	KindReady = "ready" // modules loaded, plan read; fields: uptime
	KindBegin = "begin" // step starts; fields: step index
	KindOut   = "out"   // step stdout; fields: step index, payload length
	KindErr   = "err"   // step stderr; fields: step index, payload length
	KindEnd   = "end"   // step ended; fields: step index, exit status, milliseconds, "timeout"|"ok"
	KindNote  = "note"  // guest diagnostics; fields: message (rest of line)
	KindFatal = "fatal" // guest cannot go on; fields: message (rest of line)
	KindDone  = "done"  // plan finished; the guest powers off next
)

const prefix = "\x01LAB "

// Record is one decoded record.
type Record struct {
	Kind    string
	Fields  []string // header fields after the kind
	Payload []byte   // for out and err
}

// Step returns the step index of begin, out, err and end records.
func (r Record) Step() (int, error) {
	if len(r.Fields) == 0 {
		return 0, fmt.Errorf("wire: %s record without step index", r.Kind)
	}
	return strconv.Atoi(r.Fields[0])
}

// Rest returns the fields joined back into the message of note and fatal
// records.
func (r Record) Rest() string { return strings.Join(r.Fields, " ") }

// WriteRecord writes a header-only record.
func WriteRecord(w io.Writer, kind string, fields ...string) error {
	_, err := io.WriteString(w, prefix+strings.Join(append([]string{kind}, fields...), " ")+"\n")
	return err
}

// WriteData writes an out or err record carrying p.
func WriteData(w io.Writer, kind string, step int, p []byte) error {
	hdr := fmt.Sprintf("%s%s %d %d\n", prefix, kind, step, len(p))
	_, err := w.Write(append([]byte(hdr), p...))
	return err
}

// Reader decodes records. Bytes outside records (there should be none) are
// collected in Junk for diagnostics.
type Reader struct {
	r    *bufio.Reader
	Junk strings.Builder
}

// NewReader returns a Reader decoding r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next record, or io.EOF when the channel is closed.
func (d *Reader) Next() (Record, error) {
	for {
		line, err := d.r.ReadString('\n')
		if err != nil {
			if line != "" {
				d.junk(line)
			}
			if err == io.EOF {
				return Record{}, io.EOF
			}
			return Record{}, err
		}
		i := strings.Index(line, prefix)
		if i < 0 {
			d.junk(line)
			continue
		}
		if i > 0 {
			d.junk(line[:i])
		}
		fields := strings.Fields(strings.TrimSuffix(line[i+len(prefix):], "\n"))
		if len(fields) == 0 {
			d.junk(line)
			continue
		}
		rec := Record{Kind: fields[0], Fields: fields[1:]}
		if rec.Kind == KindOut || rec.Kind == KindErr {
			if len(rec.Fields) != 2 {
				return Record{}, fmt.Errorf("wire: malformed %s header %q", rec.Kind, line)
			}
			n, err := strconv.Atoi(rec.Fields[1])
			if err != nil || n < 0 {
				return Record{}, fmt.Errorf("wire: malformed %s length in %q", rec.Kind, line)
			}
			rec.Payload = make([]byte, n)
			if _, err := io.ReadFull(d.r, rec.Payload); err != nil {
				return Record{}, fmt.Errorf("wire: truncated %s payload: %w", rec.Kind, err)
			}
		}
		return rec, nil
	}
}

func (d *Reader) junk(s string) {
	if d.Junk.Len() < 64<<10 {
		d.Junk.WriteString(s)
	}
}
