//go:build amd64 || arm64 || 386 || arm || riscv64 || loong64 || ppc64le || mips64le || mipsle

package ipvs

// Exact bytes of requests, written out by hand from the format ipvsadm
// 1.31 sends (docs/reference/ipvsadm-1.31.md §12.1): attribute order, NLA_F_NESTED nests, ports and
// the IPv4 netmask in network order, everything else in host order (these
// expectations are for little-endian hosts).

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		b.WriteString(strings.Join(strings.Fields(line), ""))
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// encode builds req in a buffer full of stale bytes, as a pipeline's
// reused buffer is: every byte of the message must be written.
func encode(req Request) []byte {
	stale := bytes.Repeat([]byte{0xaa}, 4096)
	m := builder{b: stale[:0]}
	m.request(0x1c, nlmFRequest|nlmFAck, 7, &req)
	return m.b
}

func checkBytes(t *testing.T, got, want []byte) {
	t.Helper()
	if string(got) != string(want) {
		t.Errorf("bytes differ:\n got  %x\n want %x", got, want)
	}
}

func TestEncodeNewService(t *testing.T) {
	s := Service{Family: AFInet, Protocol: ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80,
		Scheduler: "wlc", Flags: FlagPersistent, Timeout: 360, Netmask: 0xffffff00}
	want := unhex(t, `
		68000000 1c00 0500 07000000 00000000  # nlmsghdr: 104 bytes, family 0x1c, REQUEST|ACK, seq 7
		01 01 0000                            # genl: NEW_SERVICE, version 1
		5400 0180                             # SERVICE nest (NLA_F_NESTED), 84 bytes
		0600 0100 0200 0000                   # AF 2
		0600 0200 0600 0000                   # PROTOCOL 6
		1400 0300 0a000001 000000000000000000000000 # ADDR: IPv4 in the first 4 of 16 bytes
		0600 0400 0050 0000                   # PORT 80, network order
		0800 0600 776c6300                    # SCHED_NAME "wlc\0"
		0c00 0700 01000000 ffffffff           # FLAGS {flags, mask all ones}
		0800 0800 68010000                    # TIMEOUT 360
		0800 0900 ffffff00                    # NETMASK 255.255.255.0 as address bytes
	`)
	checkBytes(t, encode(Request{Cmd: CmdNewService, Service: &s}), want)
}

func TestEncodeFwmarkV6ServiceWithPE(t *testing.T) {
	s := Service{Family: AFInet6, FWMark: 0x01020304, Protocol: ProtoUDP, Addr: netip.MustParseAddr("::1"), Port: 9,
		Scheduler: "sh", PEName: "sip", Flags: FlagSched1, Netmask: 64}
	want := unhex(t, `
		54000000 1c00 0500 07000000 00000000
		02 01 0000                            # SET_SERVICE
		4000 0180
		0600 0100 0a00 0000                   # AF 10
		0800 0500 04030201                    # FWMARK only: no protocol, address or port
		0700 0600 736800 00                   # SCHED_NAME "sh\0", padded
		0800 0b00 73697000                    # PE_NAME "sip\0"
		0c00 0700 08000000 ffffffff
		0800 0800 00000000
		0800 0900 40000000                    # NETMASK: an IPv6 prefix length, host order
	`)
	checkBytes(t, encode(Request{Cmd: CmdSetService, Service: &s}), want)
}

func TestEncodeNewDest(t *testing.T) {
	s := Service{Family: AFInet, FWMark: 5, Scheduler: "", Netmask: 0xffffffff}
	d := Destination{Family: AFInet6, Addr: netip.MustParseAddr("2001:db8::1"), Port: 8080, FwdMethod: FwdTunnel,
		Weight: 2147483647, TunType: TunGUE, TunPort: 6080, TunFlags: TunFlagCsum, UThreshold: 10, LThreshold: 2}
	want := unhex(t, `
		ac000000 1c00 0500 07000000 00000000
		05 01 0000                            # NEW_DEST
		3800 0180                             # SERVICE nest
		0600 0100 0200 0000
		0800 0500 05000000
		0500 0600 00 000000                   # SCHED_NAME "" (ipvsadm sends it empty)
		0c00 0700 00000000 ffffffff
		0800 0800 00000000
		0800 0900 ffffffff
		6000 0280                             # DEST nest, 96 bytes
		0600 0b00 0a00 0000                   # ADDR_FAMILY 10 first
		1400 0100 20010db8000000000000000000000001
		0600 0200 1f90 0000                   # PORT 8080, network order
		0800 0300 02000000                    # FWD_METHOD tunnel
		0800 0400 ffffff7f                    # WEIGHT
		0500 0d00 01 000000                   # TUN_TYPE gue
		0600 0e00 17c0 0000                   # TUN_PORT 6080, network order
		0600 0f00 0100 0000                   # TUN_FLAGS csum
		0800 0500 0a000000                    # U_THRESH
		0800 0600 02000000                    # L_THRESH
	`)
	checkBytes(t, encode(Request{Cmd: CmdNewDest, Service: &s, Dest: &d}), want)
}

func TestEncodeDaemons(t *testing.T) {
	start := Daemon{State: DaemonBackup, Interface: "eth0", SyncID: 9, MaxLen: 1400, Group: netip.MustParseAddr("239.1.2.3"), Port: 8849, TTL: 2}
	want := unhex(t, `
		54000000 1c00 0500 07000000 00000000
		09 01 0000                            # NEW_DAEMON
		4000 0380
		0800 0100 02000000                    # STATE backup
		0900 0200 65746830 00 000000          # MCAST_IFN "eth0\0"
		0800 0300 09000000                    # SYNC_ID
		0600 0400 7805 0000                   # SYNC_MAXLEN 1400
		0600 0700 9122 0000                   # MCAST_PORT 8849, host order
		0500 0800 02 000000                   # MCAST_TTL
		0800 0500 ef010203                    # MCAST_GROUP as address bytes
	`)
	checkBytes(t, encode(Request{Cmd: CmdNewDaemon, Daemon: &start}), want)

	bare := Daemon{State: DaemonMaster, Interface: "lo"}
	want = unhex(t, `
		30000000 1c00 0500 07000000 00000000
		09 01 0000
		1c00 0380
		0800 0100 01000000
		0700 0200 6c6f00 00                   # unset options are not sent
		0800 0300 00000000
	`)
	checkBytes(t, encode(Request{Cmd: CmdNewDaemon, Daemon: &bare}), want)

	stop := Daemon{State: DaemonMaster, SyncID: 3, MaxLen: 1, TTL: 1, Port: 1, Group: netip.MustParseAddr("224.0.0.1")}
	want = unhex(t, `
		30000000 1c00 0500 07000000 00000000
		0a 01 0000                            # DEL_DAEMON: state, empty interface, sync id only
		1c00 0380
		0800 0100 01000000
		0500 0200 00 000000
		0800 0300 03000000
	`)
	checkBytes(t, encode(Request{Cmd: CmdDelDaemon, Daemon: &stop}), want)
}

func TestEncodeConfigZeroFlush(t *testing.T) {
	want := unhex(t, `
		2c000000 1c00 0500 07000000 00000000
		0c 01 0000                            # SET_CONFIG: all three, always
		0800 0400 0a000000
		0800 0500 00000000
		0800 0600 14000000
	`)
	checkBytes(t, encode(Request{Cmd: CmdSetConfig, Timeouts: &Timeouts{TCP: 10, UDP: 20}}), want)
	checkBytes(t, encode(Request{Cmd: CmdZero}), unhex(t, `14000000 1c00 0500 07000000 00000000 10 01 0000`))
	checkBytes(t, encode(Request{Cmd: CmdFlush}), unhex(t, `14000000 1c00 0500 07000000 00000000 11 01 0000`))
}

func TestEncodeGetDestNamesTheServiceOnly(t *testing.T) {
	s := Service{Family: AFInet, Protocol: ProtoUDP, Addr: netip.MustParseAddr("192.0.2.1"), Port: 53, Scheduler: "rr", Flags: 1, Timeout: 9, Netmask: 1}
	var m builder
	m.begin(0x1c, nlmFRequest|nlmFAck|nlmFDump, 7, uint8(CmdGetDest), 1)
	n := m.nest(cmdAttrService)
	m.serviceIdentity(&s)
	m.endNest(n)
	m.end()
	want := unhex(t, `
		44000000 1c00 0503 07000000 00000000  # REQUEST|ACK|DUMP
		08 01 0000
		3000 0180
		0600 0100 0200 0000
		0600 0200 1100 0000
		1400 0300 c0000201 000000000000000000000000
		0600 0400 0035 0000
	`)
	checkBytes(t, m.b, want)
}

// TestDecodeDestOnePass pins what the one-pass destination decoder keeps
// from the table-based one: the last occurrence of an attribute wins,
// STATS64 is preferred to STATS whatever their order, ADDR_FAMILY decides
// how the address is read wherever it comes, a missing address or a
// malformed stream is refused.
func TestDecodeDestOnePass(t *testing.T) {
	var m builder
	stats := func(typ uint16, conns uint64) {
		n := m.nest(typ | nlaFNested)
		m.u32(statsAttrConns, uint32(conns))
		m.endNest(n)
	}
	m.u16(destAttrPort, 0x1111) // overridden by the next one
	m.be16(destAttrPort, 8080)
	stats(destAttrStats64, 64)
	m.u32(destAttrWeight, 1)
	m.u32(destAttrWeight, 7)
	stats(destAttrStats, 32)
	m.attr(destAttrAddr, netip.MustParseAddr("2001:db8::5").AsSlice())
	m.u16(destAttrAddrFamily, uint16(AFInet6))
	var d DestinationEntry
	if !decodeDest(m.b, AFInet, &d, true) {
		t.Fatal("refused a well-formed nest")
	}
	want := DestinationEntry{Destination{Family: AFInet6, Addr: netip.MustParseAddr("2001:db8::5"), Port: 8080, Weight: 7}, DestCounters{Stats: Stats{Conns: 64}}}
	if d != want {
		t.Errorf("decoded %+v, want %+v", d, want)
	}
	var noAddr builder
	noAddr.be16(destAttrPort, 80)
	if decodeDest(noAddr.b, AFInet, &d, true) {
		t.Error("accepted a nest without an address")
	}
	bad := append([]byte(nil), m.b...)
	native.PutUint16(bad[len(bad)-8:], 200) // the last attribute claims more than is there
	if decodeDest(bad, AFInet, &d, true) {
		t.Error("accepted a malformed nest")
	}
}

// TestEncodeAlikeAsInFull: a builder that copies alike destination
// requests (builder.alike) writes, request after request, exactly the
// bytes of a builder that encodes each one in full, on random sequences
// where most requests differ from the one before only in the
// destination's address and port, and the others in every other field,
// command, flags or service; with other messages between them and the
// buffer sent (emptied) now and then.
func TestEncodeAlikeAsInFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 2026))
	addrs := []netip.Addr{netip.MustParseAddr("192.168.1.2"), netip.MustParseAddr("10.9.8.7"), netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("::ffff:10.1.2.3"), {}, netip.MustParseAddr("fe80::2")}
	svcs := []Service{
		{Family: AFInet, Protocol: ProtoTCP, Addr: addrs[1], Port: 80, Scheduler: "wlc", Netmask: 0xffffffff},
		{Family: AFInet, Protocol: ProtoUDP, Addr: addrs[1], Port: 80, Scheduler: "wlc", Netmask: 0xffffffff},
		{Family: AFInet6, Protocol: ProtoTCP, Addr: addrs[2], Port: 443, Scheduler: "mh", Flags: FlagSched1, Netmask: 128},
		{Family: AFInet, FWMark: 7, Scheduler: "rr", PEName: "sip", Flags: FlagPersistent, Timeout: 300, Netmask: 0xffffff00},
	}
	var alike, full builder
	copied := 0
	var svc Service
	var dest Destination
	for n := range 20000 {
		if n%500 == 0 || rng.IntN(200) == 0 {
			alike.b, full.b = alike.b[:0], full.b[:0] // a batch sent
		}
		cmd := CmdNewDest
		switch r := rng.IntN(20); {
		case r == 0:
			cmd = CmdSetDest
		case r == 1:
			cmd = CmdDelDest
		case r == 2:
			cmd = CmdNewService
		}
		if rng.IntN(10) == 0 {
			svc = svcs[rng.IntN(len(svcs))]
			if rng.IntN(2) == 0 {
				svc.Port++
			}
		}
		dest.Addr, dest.Port = addrs[rng.IntN(len(addrs))], uint16(rng.IntN(3)*8080)
		if rng.IntN(10) == 0 {
			dest = Destination{Family: []Family{AFInet, AFInet6}[rng.IntN(2)], FwdMethod: FwdMethod(rng.IntN(4)),
				Weight: uint32(rng.IntN(3)), UThreshold: uint32(rng.IntN(2)), LThreshold: uint32(rng.IntN(2)),
				TunType: TunType(rng.IntN(3)), TunPort: uint16(rng.IntN(2) * 6080), TunFlags: TunFlags(rng.IntN(2)),
				Addr: dest.Addr, Port: dest.Port}
		}
		flags := uint16(nlmFRequest)
		if rng.IntN(10) == 0 {
			flags |= nlmFAck
		}
		s, d := svc, dest
		req := Request{Cmd: cmd, Service: &s, Dest: &d}
		seq := uint32(n + 1)
		before := len(alike.b)
		wasAlike := alike.alike.matches(0x1c, flags, &req)
		alike.request(0x1c, flags, seq, &req)
		full.alike = alikeDest{} // encodes every request in full
		start := len(full.b)
		full.request(0x1c, flags, seq, &req)
		if got, want := alike.b[before:], full.b[start:]; string(got) != string(want) {
			t.Fatalf("request %d (%v, copied: %v) %+v %+v:\n got  %x\n want %x", n, cmd, wasAlike, s, d, got, want)
		}
		if wasAlike {
			copied++
		}
		// The caller may change its values after the request is built.
		s.Port, d.Weight = 1, 99
	}
	if copied < 10000 {
		t.Errorf("only %d requests were copies: the test explores too little", copied)
	}
}
