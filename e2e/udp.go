package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// ServeUDPEcho answers every datagram on pc with "NAME " and the datagram,
// until ctx ends.
func ServeUDPEcho(ctx context.Context, name string, pc net.PacketConn) error {
	return answerDatagrams(ctx, pc, func(q []byte) []byte { return append([]byte(name+" "), q...) })
}

// UDPAnswer is one datagram a UDP flow sent and who answered it ("" when
// nothing came back within the flow's timeout).
type UDPAnswer struct {
	Sent   time.Time
	Server string
}

// UDPFlow is one UDP flow: a socket from a fixed local address to addr,
// as IPVS sees one connection entry.
type UDPFlow struct {
	conn    *net.UDPConn
	timeout time.Duration
}

// DialUDPFlow opens a flow from local ("IP:PORT") to addr; each Ping
// waits at most timeout for its answer.
func DialUDPFlow(local, addr string, timeout time.Duration) (*UDPFlow, error) {
	la, err := net.ResolveUDPAddr("udp4", local)
	if err != nil {
		return nil, err
	}
	ra, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return nil, err
	}
	c, err := net.DialUDP("udp4", la, ra)
	if err != nil {
		return nil, err
	}
	return &UDPFlow{conn: c, timeout: timeout}, nil
}

// Ping sends one datagram and returns who answered it ("" for no answer
// within the timeout; an ICMP error is an error).
func (f *UDPFlow) Ping() (UDPAnswer, error) {
	a := UDPAnswer{Sent: time.Now()}
	if _, err := f.conn.Write([]byte("ping")); err != nil {
		return a, err
	}
	f.conn.SetReadDeadline(time.Now().Add(f.timeout))
	buf := make([]byte, 2048)
	n, err := f.conn.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return a, nil
	}
	if err != nil {
		return a, err
	}
	a.Server, _, _ = strings.Cut(string(buf[:n]), " ")
	return a, nil
}

// Close closes the flow's socket.
func (f *UDPFlow) Close() error { return f.conn.Close() }

// ProbeUDP sends a datagram on each of n UDP flows to addr, from local
// ports base..base+n-1, and says which real server answered each (three
// tries a flow, timeout each). As with Probe for TCP, the same ports
// probed twice are the same flows to IPVS: two probes tell which flows
// changed real server.
func ProbeUDP(addr string, n, base int, timeout time.Duration) ProbeResult {
	return probeEach(n, base, func(port int) (string, error) {
		f, err := DialUDPFlow(":"+strconv.Itoa(port), addr, timeout)
		if err != nil {
			return "", err
		}
		defer f.Close()
		for range 3 {
			a, err := f.Ping()
			if err != nil || a.Server != "" {
				return a.Server, err
			}
		}
		return "", fmt.Errorf("no answer to 3 datagrams within %v each", timeout)
	})
}
