// Package save writes the IPVS table as ipvsadm rules.
//
// It writes byte for byte what ipvsadm 1.31's -S (--save) writes, which is
// also what the ipvsadm-save wrapper prints.
//
// The rules come in listing order (see package ipvsadm/list), with names
// unless Numeric, no title and no column cuts; only the 59-character limit
// on address:port texts applies. What the rules cannot express is lost, as
// with the real tool: thresholds, the mask of non-persistent services, and
// fwmarks of 2^31 and above are written as negative numbers.
package save

import (
	"bufio"
	"io"
	"strconv"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/ipvsadm/notation"
)

// Write writes one "-A" line per service followed by one "-a" line per
// destination. Of o only Numeric and Resolver matter: -S always sorts.
// Kernel errors are returned unchanged after the rules written so far.
func Write(w io.Writer, c ipvs.Reader, o list.Options) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	wr := writer{w: bw, o: &o}
	if err := list.Walk(c, false, wr.service); err != nil {
		return flushThen(bw, err)
	}
	return bw.Flush()
}

func flushThen(bw *bufio.Writer, err error) error {
	if ferr := bw.Flush(); ferr != nil {
		return ferr
	}
	return err
}

// writer builds rule lines in reused buffers.
type writer struct {
	w    *bufio.Writer
	o    *list.Options
	svc  []byte // the current service's designator, e.g. "-t 10.0.0.1:80"
	line []byte
}

// service writes the -A line of svc and the -a lines of its destinations.
func (wr *writer) service(e *ipvs.ServiceEntry, dests []ipvs.DestinationEntry) error {
	svc := &e.Service
	wr.svc = appendDesignator(wr.svc[:0], svc, wr.o)
	b := append(wr.line[:0], "-A "...)
	b = append(b, wr.svc...)
	b = append(b, " -s "...)
	b = append(b, svc.Scheduler...)
	if svc.Flags&ipvs.FlagPersistent != 0 {
		b = append(b, " -p "...)
		b = strconv.AppendUint(b, uint64(svc.Timeout), 10)
		b = notation.AppendPersistence(b, svc, " -M ")
	}
	if svc.PEName != "" {
		b = append(b, " --pe "...)
		b = append(b, svc.PEName...)
	}
	if svc.Flags&ipvs.FlagOnePacket != 0 {
		b = append(b, " -o"...)
	}
	if notation.HasSchedFlags(svc.Flags) {
		b = append(b, " -b "...)
		b = notation.AppendSchedFlags(b, svc.Scheduler, svc.Flags)
	}
	b = append(b, '\n')
	for i := range dests {
		b = wr.destination(b, svc, &dests[i].Destination)
	}
	wr.line = b[:0]
	_, err := wr.w.Write(b)
	return err
}

// destination appends the -a line of d.
func (wr *writer) destination(b []byte, svc *ipvs.Service, d *ipvs.Destination) []byte {
	b = append(b, "-a "...)
	b = append(b, wr.svc...)
	b = append(b, " -r "...)
	b = list.AppendAddrPort(b, d.Family, d.Addr, d.Port, svc.Protocol, wr.o)
	b = append(b, ' ')
	b = append(b, notation.Method(d.FwdMethod).Option...)
	b = append(b, " -w "...)
	b = strconv.AppendInt(b, int64(int32(d.Weight)), 10)
	if d.FwdMethod&7 == ipvs.FwdTunnel {
		if name, ok := notation.TunTypeName(d.TunType); ok {
			b = append(b, " --tun-type "...)
			b = append(b, name...)
			switch d.TunType {
			case ipvs.TunGUE:
				b = append(b, " --tun-port "...)
				b = strconv.AppendUint(b, uint64(d.TunPort), 10)
				b = append(b, ' ')
				b = append(b, notation.TunCsum(d.TunFlags).Option...)
			case ipvs.TunGRE:
				b = append(b, ' ')
				b = append(b, notation.TunCsum(d.TunFlags).Option...)
			}
		}
	}
	return append(b, '\n')
}

// appendDesignator appends the service part of a rule: "-f <mark>" (signed)
// plus " -6", or the protocol option and the address:port text.
func appendDesignator(b []byte, svc *ipvs.Service, o *list.Options) []byte {
	if svc.FWMark != 0 {
		return notation.AppendFWMark(b, svc, "-f ", " -6")
	}
	b = append(b, notation.Protocol(svc.Protocol).Option...)
	b = append(b, ' ')
	return list.AppendAddrPort(b, svc.Family, svc.Addr, svc.Port, svc.Protocol, o)
}
