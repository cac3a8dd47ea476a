package ipvs

// The reads: Info, the service and destination dumps, timeouts, daemons.

import (
	"errors"
	"slices"

	"golang.org/x/sys/unix"
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
// read them again). The connection counts are still read. Saving,
// planning and most listings never look at the counters, whose decoding
// is a large part of a destination's (figures: decision 0007). It returns
// the previous setting.
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

// Conn hands out dumps without an allocation per call.
var _ Dumper = (*Conn)(nil)
