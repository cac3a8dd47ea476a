//go:build lab

package testscripts

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The differential runner compares the kernel's IPVS state of the two
// namespaces after every state-changing line. It reads that state itself,
// over generic netlink, with this small dumper: it is independent of every
// package under test (ipvs/ included), costs no process (a reference
// ipvsadm run costs about 0.1 s of CPU under TCG, two per line), and
// compares every attribute the kernel reports rather than what some
// listing format happens to print. Attributes are not interpreted, only
// named for the report; counters and connection counts, which move with
// traffic and time, are left out.

// IPVS generic netlink protocol numbers (include/uapi/linux/ip_vs.h).
const (
	ipvsCmdGetService = 4
	ipvsCmdGetDest    = 8
	ipvsCmdGetDaemon  = 11
	ipvsCmdGetConfig  = 13

	ipvsAttrService = 1
	ipvsAttrDest    = 2
	ipvsAttrDaemon  = 3

	genlCtrlCmdGetFamily   = 3
	genlCtrlAttrFamilyID   = 1
	genlCtrlAttrFamilyName = 2
	nlaTypeMask            = 0x3fff
	genlHeaderLen          = 4
	nlmsgAlign             = 4
)

// attrName names an attribute for reports, and says how to print it:
// 'u' little-endian (host order) unsigned, 'n' big-endian (network order)
// unsigned, 's' NUL-terminated string, 'x' hex.
type attrName struct {
	name string
	kind byte
}

var (
	serviceAttrs = map[uint16]attrName{
		1: {"af", 'u'}, 2: {"protocol", 'u'}, 3: {"addr", 'x'}, 4: {"port", 'n'}, 5: {"fwmark", 'u'},
		6: {"sched", 's'}, 7: {"flags", 'x'}, 8: {"timeout", 'u'}, 9: {"netmask", 'x'}, 11: {"pe", 's'},
	}
	destAttrs = map[uint16]attrName{
		1: {"addr", 'x'}, 2: {"port", 'n'}, 3: {"fwd", 'u'}, 4: {"weight", 'u'}, 5: {"u_thresh", 'u'},
		6: {"l_thresh", 'u'}, 11: {"af", 'u'}, 13: {"tun_type", 'u'}, 14: {"tun_port", 'n'}, 15: {"tun_flags", 'u'},
	}
	daemonAttrs = map[uint16]attrName{
		1: {"state", 'u'}, 2: {"mcast_ifn", 's'}, 3: {"syncid", 'u'}, 4: {"maxlen", 'u'}, 5: {"group", 'x'},
		6: {"group6", 'x'}, 7: {"port", 'u'}, 8: {"ttl", 'u'},
	}
	configAttrs = map[uint16]attrName{4: {"tcp", 'u'}, 5: {"tcpfin", 'u'}, 6: {"udp", 'u'}}

	// Left out of the comparison: STATS (10) and STATS64 (12) of services
	// and destinations, and a destination's ACTIVE_CONNS (7), INACT_CONNS
	// (8) and PERSIST_CONNS (9).
	serviceSkip = map[uint16]bool{10: true, 12: true}
	destSkip    = map[uint16]bool{7: true, 8: true, 9: true, 10: true, 12: true}
)

// ipvsConn is a generic netlink socket in one namespace.
type ipvsConn struct {
	fd     int
	seq    uint32
	family uint16
	buf    []byte // receive buffer, reused: zeroing a fresh one per request is slow under TCG
}

// dialIPVS opens a generic netlink socket in namespace ns (a socket stays in
// the namespace it was created in) and resolves the IPVS family.
func dialIPVS(ns *os.File) (*ipvsConn, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("setns: %w", err)
	}
	fd, sockErr := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("setns back to the original namespace: %w", err)
	}
	runtime.UnlockOSThread()
	if sockErr != nil {
		return nil, sockErr
	}
	c := &ipvsConn{fd: fd, family: unix.GENL_ID_CTRL}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		c.Close()
		return nil, err
	}
	msgs, err := c.request(genlCtrlCmdGetFamily, 0, attr(genlCtrlAttrFamilyName, []byte("IPVS\x00")))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("resolve the IPVS family: %w", err)
	}
	for _, m := range msgs {
		for _, a := range parseAttrs(m) {
			if a.typ == genlCtrlAttrFamilyID && len(a.data) >= 2 {
				c.family = binary.LittleEndian.Uint16(a.data)
				return c, nil
			}
		}
	}
	c.Close()
	return nil, errors.New("resolve the IPVS family: no family id in the answer")
}

func (c *ipvsConn) Close() error { return unix.Close(c.fd) }

// request sends one generic netlink request and returns the attribute
// payloads of the answers (after the genl header). Dumps (flags
// NLM_F_DUMP) end with NLMSG_DONE, other requests with their acknowledgement.
func (c *ipvsConn) request(cmd uint8, flags uint16, attrs []byte) ([][]byte, error) {
	c.seq++
	msg := make([]byte, unix.NLMSG_HDRLEN+genlHeaderLen, unix.NLMSG_HDRLEN+genlHeaderLen+len(attrs))
	msg = append(msg, attrs...)
	binary.LittleEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.LittleEndian.PutUint16(msg[4:], c.family)
	binary.LittleEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	binary.LittleEndian.PutUint32(msg[8:], c.seq)
	msg[unix.NLMSG_HDRLEN] = cmd
	msg[unix.NLMSG_HDRLEN+1] = 1 // version
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out [][]byte
	if c.buf == nil {
		c.buf = make([]byte, 1<<20)
	}
	buf := c.buf
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return nil, err
		}
		b := buf[:n]
		for len(b) >= unix.NLMSG_HDRLEN {
			l := int(binary.LittleEndian.Uint32(b))
			typ := binary.LittleEndian.Uint16(b[4:])
			seq := binary.LittleEndian.Uint32(b[8:])
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return nil, fmt.Errorf("netlink: bad message length %d", l)
			}
			body := b[unix.NLMSG_HDRLEN:l]
			b = b[min(align(l), len(b)):]
			if seq != c.seq {
				continue
			}
			switch typ {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(body) < 4 {
					return nil, errors.New("netlink: short error message")
				}
				if code := int32(binary.LittleEndian.Uint32(body)); code != 0 {
					return nil, unix.Errno(-code)
				}
				if flags&unix.NLM_F_DUMP == 0 {
					return out, nil // the acknowledgement
				}
			default:
				if len(body) >= genlHeaderLen {
					// Copied: the next Recvfrom reuses buf.
					out = append(out, append([]byte(nil), body[genlHeaderLen:]...))
				}
			}
		}
	}
}

type nlattr struct {
	typ  uint16
	data []byte
}

func align(n int) int { return (n + nlmsgAlign - 1) &^ (nlmsgAlign - 1) }

func attr(typ uint16, data []byte) []byte {
	b := make([]byte, 4, align(4+len(data)))
	binary.LittleEndian.PutUint16(b, uint16(4+len(data)))
	binary.LittleEndian.PutUint16(b[2:], typ)
	b = append(b, data...)
	return append(b, make([]byte, align(len(b))-len(b))...)
}

func parseAttrs(b []byte) []nlattr {
	var as []nlattr
	for len(b) >= 4 {
		l := int(binary.LittleEndian.Uint16(b))
		if l < 4 || l > len(b) {
			break
		}
		as = append(as, nlattr{typ: binary.LittleEndian.Uint16(b[2:]) & nlaTypeMask, data: b[4:l]})
		b = b[min(align(l), len(b)):]
	}
	return as
}

// render prints attributes sorted by type, skipping the ones in skip.
func render(as []nlattr, names map[uint16]attrName, skip map[uint16]bool) string {
	as = append([]nlattr(nil), as...)
	sort.SliceStable(as, func(i, j int) bool { return as[i].typ < as[j].typ })
	var parts []string
	for _, a := range as {
		if skip[a.typ] {
			continue
		}
		n, ok := names[a.typ]
		if !ok {
			n = attrName{strconv.Itoa(int(a.typ)), 'x'}
		}
		parts = append(parts, n.name+"="+attrValue(n.kind, a.data))
	}
	return strings.Join(parts, " ")
}

func attrValue(kind byte, d []byte) string {
	switch {
	case kind == 's' && len(d) > 0 && d[len(d)-1] == 0:
		return strconv.Quote(string(d[:len(d)-1]))
	case (kind == 'u' || kind == 'n') && (len(d) == 1 || len(d) == 2 || len(d) == 4 || len(d) == 8):
		var order binary.ByteOrder = binary.LittleEndian
		if kind == 'n' {
			order = binary.BigEndian
		}
		var v uint64
		switch len(d) {
		case 1:
			v = uint64(d[0])
		case 2:
			v = uint64(order.Uint16(d))
		case 4:
			v = uint64(order.Uint32(d))
		case 8:
			v = order.Uint64(d)
		}
		return strconv.FormatUint(v, 10)
	}
	return hex.EncodeToString(d)
}

// identifying are the service attributes a GET_DEST request names its
// service by.
var identifying = map[uint16]bool{1: true, 2: true, 3: true, 4: true, 5: true}

// kernelState dumps the namespace's services with their destinations, the
// timeouts and the sync daemons, as sorted text. The kernel dumps services
// in hash order, and the hash mixes in a per-namespace pointer, so services
// are sorted; destinations are sorted too (their dump order, most recently
// added first, is compared by the listings the corpus runs).
func (c *ipvsConn) kernelState() (string, error) {
	svcs, err := c.request(ipvsCmdGetService, unix.NLM_F_DUMP, nil)
	if err != nil {
		return "", fmt.Errorf("dump services: %w", err)
	}
	var blocks []string
	for _, m := range svcs {
		for _, top := range parseAttrs(m) {
			if top.typ != ipvsAttrService {
				continue
			}
			sattrs := parseAttrs(top.data)
			var id []byte
			for _, a := range sattrs {
				if identifying[a.typ] {
					id = append(id, attr(a.typ, a.data)...)
				}
			}
			dests, err := c.request(ipvsCmdGetDest, unix.NLM_F_DUMP, attr(ipvsAttrService|unix.NLA_F_NESTED, id))
			if err != nil {
				return "", fmt.Errorf("dump destinations of %s: %w", render(sattrs, serviceAttrs, serviceSkip), err)
			}
			var dl []string
			for _, dm := range dests {
				for _, d := range parseAttrs(dm) {
					if d.typ == ipvsAttrDest {
						dl = append(dl, "  dest "+render(parseAttrs(d.data), destAttrs, destSkip))
					}
				}
			}
			sort.Strings(dl)
			blocks = append(blocks, strings.Join(append([]string{"service " + render(sattrs, serviceAttrs, serviceSkip)}, dl...), "\n"))
		}
	}
	sort.Strings(blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl + "\n")
	}
	cfg, err := c.request(ipvsCmdGetConfig, 0, nil)
	if err != nil {
		return "", fmt.Errorf("get timeouts: %w", err)
	}
	for _, m := range cfg {
		b.WriteString("timeouts " + render(parseAttrs(m), configAttrs, nil) + "\n")
	}
	ds, err := c.request(ipvsCmdGetDaemon, unix.NLM_F_DUMP, nil)
	if err != nil {
		return "", fmt.Errorf("dump daemons: %w", err)
	}
	var dl []string
	for _, m := range ds {
		for _, d := range parseAttrs(m) {
			if d.typ == ipvsAttrDaemon {
				dl = append(dl, "daemon "+render(parseAttrs(d.data), daemonAttrs, nil))
			}
		}
	}
	sort.Strings(dl)
	for _, d := range dl {
		b.WriteString(d + "\n")
	}
	return b.String(), nil
}
