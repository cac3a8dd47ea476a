package lvsctl

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"net/netip"
	"os"
	"strconv"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/rules"
)

// liveConns counts, per real server address and port, the entries of the
// kernel's connection table (path, normally /proc/net/ip_vs_conn) that
// can still carry data: all but TIME_WAIT and CLOSE (finished TCP
// connections, kept for minutes only to absorb late packets) and NONE
// (persistence templates, which are not connections).
func liveConns(path string) (map[rules.DestKey]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[rules.DestKey]int{}
	sc := bufio.NewScanner(f)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		// Pro FromIP FPrt ToIP TPrt DestIP DPrt State Expires ...
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 9 {
			continue
		}
		switch string(fields[7]) {
		case "TIME_WAIT", "CLOSE", "NONE":
			continue
		}
		addr, ok := procAddr(fields[5])
		if !ok {
			continue
		}
		port, err := strconv.ParseUint(string(fields[6]), 16, 16)
		if err != nil {
			continue
		}
		family := ipvs.AFInet
		if addr.Is6() {
			family = ipvs.AFInet6
		}
		out[rules.DestKey{Family: family, Addr: addr, Port: uint16(port)}]++
	}
	return out, sc.Err()
}

// procAddr reads an address as ip_vs_conn shows it: IPv4 as 8 hex digits
// (network order), IPv6 in colon form.
func procAddr(b []byte) (netip.Addr, bool) {
	if len(b) == 8 && bytes.IndexByte(b, ':') < 0 {
		var a [4]byte
		if _, err := hex.Decode(a[:], b); err != nil {
			return netip.Addr{}, false
		}
		return netip.AddrFrom4(a), true
	}
	a, err := netip.ParseAddr(string(b))
	return a, err == nil
}
