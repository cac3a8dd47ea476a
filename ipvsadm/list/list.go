// Package list writes ipvsadm 1.31's listings byte for byte.
//
// It writes the service table (-L in every format, -L <service>), the
// connection table (-L -c), the timeouts (--timeout) and the sync daemons
// (--daemon).
//
// It also holds what the -S writer (package save) shares with the listings:
// the address:port names, the scheduler-flag and forwarding texts, and the
// order, which is glibc's merge sort driven by libipvs's wrapping
// comparators (see CompareServices). Errors from the kernel are returned
// unchanged so the caller can map them to ipvsadm's messages; whatever was
// listed before the error has been written by then.
package list

import (
	"bufio"
	"io"
	"strconv"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/notation"
	"github.com/lvskit/lvskit/names"
)

// Format selects the listing's columns. When ipvsadm is given several
// format options the first of Stats, Rate, Thresholds, PersistConn, TunInfo
// wins; the caller resolves that.
type Format int

// The listing formats.
const (
	Default     Format = iota
	Stats              // --stats
	Rate               // --rate
	Thresholds         // --thresholds
	PersistConn        // --persistent-conn
	TunInfo            // --tun-info
)

// Options are the listing options of one ipvsadm invocation.
type Options struct {
	Numeric bool // -n: no host or service names
	Exact   bool // --exact: full numbers in --stats and --rate
	NoSort  bool // --nosort: kernel order
	Format  Format
	// Resolver answers name questions when Numeric is false; nil means the
	// system files (/etc/hosts, /etc/services, /etc/nsswitch.conf).
	Resolver *names.Resolver
}

// writeBufferSize is large enough that listings are written in few system
// calls.
const writeBufferSize = 64 << 10

// Table writes the full listing: the "IP Virtual Server version" header
// (before anything is fetched, so it appears even when fetching fails), the
// title lines and every service with its destinations.
func Table(w io.Writer, c ipvs.Reader, info ipvs.Info, o Options) error {
	p := newPrinter(w, &o)
	b := append(p.line[:0], "IP Virtual Server version "...)
	b = strconv.AppendUint(b, uint64(info.Version>>16&0xff), 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(info.Version>>8&0xff), 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(info.Version&0xff), 10)
	b = append(b, " (size="...)
	b = strconv.AppendInt(b, int64(int32(info.ConnTabSize)), 10)
	b = append(b, ")\n"...)
	p.emit(b)
	svcs, err := fetchTable(c, o.NoSort, o.Format == Stats || o.Format == Rate)
	if err != nil {
		return p.fail(err)
	}
	p.title()
	if err := svcs.each(c, o.NoSort, p.serviceEntry); err != nil {
		return p.fail(err)
	}
	return p.w.Flush()
}

// Service writes the listing of one service (-L -t/-u/--sctp-service/-f):
// title lines, the service and its destinations, without the version
// header. The service is fetched by key first; a missing one is the
// client's ESRCH error with nothing written.
func Service(w io.Writer, c ipvs.Reader, key ipvs.Service, o Options) error {
	svc, err := c.Service(key)
	if err != nil {
		return err
	}
	p := newPrinter(w, &o)
	p.title()
	if err := forEachService(c, []ipvs.ServiceEntry{svc}, o.NoSort, p.serviceEntry); err != nil {
		return p.fail(err)
	}
	return p.w.Flush()
}

// forEachService fetches the destinations of each service in turn, orders
// them unless noSort, and calls fn. Only one service's destinations are
// held at a time, in one reused slice; fn must not keep it.
func forEachService(c ipvs.Reader, svcs []ipvs.ServiceEntry, noSort bool, fn func(*ipvs.ServiceEntry, []ipvs.DestinationEntry) error) error {
	var d destSorter
	return ipvs.EachDestinations(c, len(svcs), func(i int) *ipvs.Service { return &svcs[i].Service },
		func(i int, dests []ipvs.DestinationEntry) error {
			return fn(&svcs[i], d.sort(dests, noSort))
		})
}

// Walk fetches every service and its destinations, and calls fn for each
// in listing order (kernel order if noSort); what -S prints. The
// services' counters are not kept (Stats is zero). It holds one copy of
// the services and at most a batch's destinations (see
// ipvs.Conn.EachDestinations); fn must keep neither pointer.
func Walk(c ipvs.Reader, noSort bool, fn func(*ipvs.ServiceEntry, []ipvs.DestinationEntry) error) error {
	svcs, err := fetchTable(c, noSort, false)
	if err != nil {
		return err
	}
	return svcs.each(c, noSort, fn)
}

// destSorter orders one service's destinations at a time with reused
// buffers.
type destSorter struct {
	spare []ipvs.DestinationEntry
	k     keySorter
}

// sort orders dests in place, unless noSort, and returns them.
func (d *destSorter) sort(dests []ipvs.DestinationEntry, noSort bool) []ipvs.DestinationEntry {
	if !noSort {
		if cap(d.spare) < len(dests) {
			d.spare = make([]ipvs.DestinationEntry, len(dests))
		}
		sortBy(&d.k, dests, d.spare[:len(dests)], destEntryKey, compareDestKeys)
	}
	return dests
}

// chunkLen is how many services one chunk of a serviceTable holds.
const chunkLen = 256

// serviceTable holds a dump's services in fixed-size chunks, so that a
// large table is stored once, without the spare capacity and the copies
// of a growing slice, and an order of indexes over them. The counters
// (half of a ServiceEntry) are kept only for listings that print them.
type serviceTable struct {
	chunks [][]ipvs.Service
	stats  [][]ipvs.Stats // nil when not kept
	n      int
	order  []sortKey // listing order; nil for the dump order
	entry  ipvs.ServiceEntry
}

func (t *serviceTable) service(i int) *ipvs.Service {
	return &t.chunks[i/chunkLen][i%chunkLen]
}

// at returns service i with its counters (zero when not kept), in a
// ServiceEntry that the next call reuses.
func (t *serviceTable) at(i int) *ipvs.ServiceEntry {
	t.entry.Service = *t.service(i)
	t.entry.Stats = ipvs.Stats{}
	if t.stats != nil {
		t.entry.Stats = t.stats[i/chunkLen][i%chunkLen]
	}
	return &t.entry
}

func (t *serviceTable) add(s *ipvs.ServiceEntry) error {
	if t.n%chunkLen == 0 {
		t.chunks = append(t.chunks, make([]ipvs.Service, chunkLen))
		if t.stats != nil {
			t.stats = append(t.stats, make([]ipvs.Stats, chunkLen))
		}
	}
	*t.service(t.n) = s.Service
	if t.stats != nil {
		t.stats[t.n/chunkLen][t.n%chunkLen] = s.Stats
	}
	t.n++
	return nil
}

// fetchTable dumps every service and, unless noSort, puts them in
// listing order; it keeps their counters when withStats.
func fetchTable(c ipvs.Reader, noSort, withStats bool) (*serviceTable, error) {
	t := &serviceTable{}
	if withStats {
		t.stats = [][]ipvs.Stats{}
	}
	if err := ipvs.DumpServices(c, t.add); err != nil {
		return nil, err
	}
	if !noSort && t.n > 1 {
		t.order = make([]sortKey, t.n)
		for i := range t.order {
			t.order[i] = serviceKey(t.service(i), i)
		}
		mergeSort(t.order, make([]sortKey, t.n), compareServiceKeys)
	}
	return t, nil
}

// each lists every service's destinations in the table's order.
func (t *serviceTable) each(c ipvs.Reader, noSort bool, fn func(*ipvs.ServiceEntry, []ipvs.DestinationEntry) error) error {
	index := func(i int) int {
		if t.order != nil {
			return int(t.order[i].index)
		}
		return i
	}
	var d destSorter
	return ipvs.EachDestinations(c, t.n, func(i int) *ipvs.Service { return t.service(index(i)) },
		func(i int, dests []ipvs.DestinationEntry) error {
			return fn(t.at(index(i)), d.sort(dests, noSort))
		})
}

// Timeouts writes the --timeout line.
func Timeouts(w io.Writer, t ipvs.Timeouts) error {
	b := append([]byte(nil), "Timeout (tcp tcpfin udp): "...)
	b = strconv.AppendInt(b, int64(int32(t.TCP)), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(int32(t.TCPFin)), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(int32(t.UDP)), 10)
	b = append(b, '\n')
	_, err := w.Write(b)
	return err
}

// Daemons writes the --daemon lines, one per running daemon in the given
// order (the kernel reports the master first). Daemons in neither state
// are skipped; optional fields appear only when the kernel reported them.
func Daemons(w io.Writer, ds []ipvs.Daemon) error {
	var b []byte
	for _, d := range ds {
		switch {
		case d.State&ipvs.DaemonMaster != 0:
			b = append(b, "master"...)
		case d.State&ipvs.DaemonBackup != 0:
			b = append(b, "backup"...)
		default:
			continue
		}
		b = append(b, " sync daemon (mcast="...)
		b = append(b, d.Interface...)
		b = append(b, ", syncid="...)
		b = strconv.AppendInt(b, int64(int32(d.SyncID)), 10)
		if d.MaxLen != 0 {
			b = append(b, ", maxlen="...)
			b = strconv.AppendUint(b, uint64(d.MaxLen), 10)
		}
		if d.Group.IsValid() {
			b = append(b, ", group="...)
			family := ipvs.AFInet6
			if d.Group.Is4() {
				family = ipvs.AFInet
			}
			b = notation.AppendAddr(b, family, notation.Addr16(d.Group))
		}
		if d.Port != 0 {
			b = append(b, ", port="...)
			b = strconv.AppendUint(b, uint64(d.Port), 10)
		}
		if d.TTL != 0 {
			b = append(b, ", ttl="...)
			b = strconv.AppendUint(b, uint64(d.TTL), 10)
		}
		b = append(b, ")\n"...)
	}
	_, err := w.Write(b)
	return err
}

// printer writes listing lines through a buffer, building each line in a
// reused scratch slice.
type printer struct {
	w    *bufio.Writer
	o    *Options
	line []byte
	name []byte
}

func newPrinter(w io.Writer, o *Options) *printer {
	return &printer{w: bufio.NewWriterSize(w, writeBufferSize), o: o, line: make([]byte, 0, 256), name: make([]byte, 0, 64)}
}

// emit writes a finished line and keeps its storage for the next one.
func (p *printer) emit(b []byte) {
	p.w.Write(b) // errors are sticky in bufio.Writer and reported by Flush
	p.line = b[:0]
}

// fail flushes what was listed so far and returns err (or the write error
// if flushing failed first).
func (p *printer) fail(err error) error {
	if ferr := p.w.Flush(); ferr != nil {
		return ferr
	}
	return err
}

// title writes the two title lines of the format.
func (p *printer) title() {
	var t string
	switch p.o.Format {
	case Stats:
		t = "Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes\n  -> RemoteAddress:Port\n"
	case Rate:
		t = "Prot LocalAddress:Port                 CPS    InPPS   OutPPS    InBPS   OutBPS\n  -> RemoteAddress:Port\n"
	case Thresholds:
		t = "Prot LocalAddress:Port            Uthreshold Lthreshold ActiveConn InActConn \n  -> RemoteAddress:Port\n"
	case PersistConn:
		t = "Prot LocalAddress:Port            Weight    PersistConn ActiveConn InActConn \n  -> RemoteAddress:Port\n"
	case TunInfo:
		t = "Prot LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward TunnelInfo    Weight ActiveConn InActConn\n"
	default:
		t = "Prot LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"
	}
	p.w.WriteString(t)
}

// appendServiceName appends the listing's service designator: "FWM  <mark>"
// (signed, plus " IPv6") or "<proto> <addr:port>" with the protocol padded
// to four columns, cut to 33 characters unless the service is IPv6.
func appendServiceName(b []byte, svc *ipvs.Service, o *Options) []byte {
	if svc.FWMark != 0 {
		return notation.AppendFWMark(b, svc, "FWM  ", " IPv6")
	}
	start := len(b)
	b = appendPadded(b, notation.Protocol(svc.Protocol).Column, 4)
	b = append(b, ' ')
	b = AppendAddrPort(b, svc.Family, svc.Addr, svc.Port, svc.Protocol, o)
	if svc.Family != ipvs.AFInet6 && len(b)-start > serviceNameCut {
		b = b[:start+serviceNameCut]
	}
	return b
}

// serviceEntry writes a service line and its destination lines.
func (p *printer) serviceEntry(svc *ipvs.ServiceEntry, dests []ipvs.DestinationEntry) error {
	o := p.o
	b := p.line[:0]
	switch o.Format {
	case Stats, Rate:
		start := len(b)
		b = appendServiceName(b, &svc.Service, o)
		b = padTo(b, start, 33)
		b = appendStats(b, &svc.Stats, o.Format, o.Exact, false)
	default:
		b = appendServiceName(b, &svc.Service, o)
		b = append(b, ' ')
		b = append(b, svc.Scheduler...)
		if notation.HasSchedFlags(svc.Flags) {
			b = append(b, " ("...)
			b = notation.AppendSchedFlags(b, svc.Scheduler, svc.Flags)
			b = append(b, ')')
		}
		if svc.Flags&ipvs.FlagPersistent != 0 {
			b = append(b, " persistent "...)
			b = strconv.AppendUint(b, uint64(svc.Timeout), 10)
			b = notation.AppendPersistence(b, &svc.Service, " mask ")
			if svc.PEName != "" {
				b = append(b, " pe "...)
				b = append(b, svc.PEName...)
			}
		}
		if svc.Flags&ipvs.FlagOnePacket != 0 {
			b = append(b, " ops"...)
		}
	}
	b = append(b, '\n')
	p.emit(b)
	for i := range dests {
		p.destination(&svc.Service, &dests[i])
	}
	return nil
}

// destination writes one destination line.
func (p *printer) destination(svc *ipvs.Service, d *ipvs.DestinationEntry) {
	o := p.o
	name := AppendAddrPort(p.name[:0], d.Family, d.Addr, d.Port, svc.Protocol, o)
	if d.Family != ipvs.AFInet6 && len(name) > destNameCut {
		name = name[:destNameCut]
	}
	p.name = name
	b := append(p.line[:0], "  -> "...)
	b = append(b, name...)
	b = appendSpaces(b, destNameCut-len(name))
	switch o.Format {
	case Stats, Rate:
		b = appendStats(b, &d.Stats, o.Format, o.Exact, true)
	case Thresholds:
		b = appendColumn(b, uint64(d.UThreshold), 10)
		b = appendColumn(b, uint64(d.LThreshold), 10)
		b = appendConns(b, d)
	case PersistConn:
		b = appendColumn(b, uint64(d.Weight), 9)
		b = appendColumn(b, uint64(d.PersistConns), 11)
		b = appendConns(b, d)
	default:
		b = append(b, ' ')
		b = appendPadded(b, notation.Method(d.FwdMethod).Column, 7)
		if o.Format == TunInfo {
			b = append(b, ' ')
			start := len(b)
			b = appendTunInfo(b, &d.Destination)
			b = padTo(b, start, 13)
		}
		b = append(b, ' ')
		b = appendIntLeft(b, int64(int32(d.Weight)), 6)
		b = appendConns(b, d)
	}
	b = append(b, '\n')
	p.emit(b)
}

// appendColumn appends a space and v left-justified in width columns.
func appendColumn(b []byte, v uint64, width int) []byte {
	return appendUintLeft(append(b, ' '), v, width)
}

// appendConns appends the ActiveConn and InActConn columns every
// destination line but --stats and --rate ends with.
func appendConns(b []byte, d *ipvs.DestinationEntry) []byte {
	b = appendColumn(b, uint64(d.ActiveConns), 10)
	return appendColumn(b, uint64(d.InactConns), 10)
}

// appendStats appends the five --stats or --rate columns. For destinations
// ipvsadm reads the kernel's 64-bit counters with 32-bit getters except the
// two byte counters, so those values wrap at 2^32; and --rate prints a
// destination's CPS, InPPS and OutPPS unscaled in 8 columns.
func appendStats(b []byte, s *ipvs.Stats, f Format, exact, dest bool) []byte {
	low := func(v uint64) uint64 {
		if dest {
			return uint64(uint32(v))
		}
		return v
	}
	if f == Stats {
		b = appendLargeNum(b, low(s.Conns), exact)
		b = appendLargeNum(b, low(s.InPkts), exact)
		b = appendLargeNum(b, low(s.OutPkts), exact)
		b = appendLargeNum(b, s.InBytes, exact)
		return appendLargeNum(b, s.OutBytes, exact)
	}
	if dest {
		for _, v := range [3]uint64{s.CPS, s.InPPS, s.OutPPS} {
			b = append(b, ' ')
			b = appendUintRight(b, low(v), 8)
		}
	} else {
		b = appendLargeNum(b, s.CPS, exact)
		b = appendLargeNum(b, s.InPPS, exact)
		b = appendLargeNum(b, s.OutPPS, exact)
	}
	b = appendLargeNum(b, low(s.InBPS), exact)
	return appendLargeNum(b, low(s.OutBPS), exact)
}
