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

// serveUDPEcho answers every datagram on pc with "NAME " and the datagram,
// until ctx ends.
func serveUDPEcho(ctx context.Context, name string, pc net.PacketConn) error {
	return answerDatagrams(ctx, pc, func(q []byte) []byte { return append([]byte(name+" "), q...) })
}

// udpAnswer is one datagram a UDP flow sent and who answered it ("" when
// nothing came back within the flow's timeout).
type udpAnswer struct {
	Sent   time.Time
	Server string
}

// udpFlow is one UDP flow: a socket from a fixed local address to addr,
// as IPVS sees one connection entry.
type udpFlow struct {
	conn    *net.UDPConn
	timeout time.Duration
}

// dialUDPFlow opens a flow from local ("IP:PORT") to addr; each Ping
// waits at most timeout for its answer.
func dialUDPFlow(local, addr string, timeout time.Duration) (*udpFlow, error) {
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
	return &udpFlow{conn: c, timeout: timeout}, nil
}

// Ping sends one datagram and returns who answered it ("" for no answer
// within the timeout; an ICMP error is an error).
func (f *udpFlow) Ping() (udpAnswer, error) {
	a := udpAnswer{Sent: time.Now()}
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
func (f *udpFlow) Close() error { return f.conn.Close() }

// probeUDPFlows sends a datagram on each of n UDP flows to addr, from local
// ports base..base+n-1, and says which real server answered each (three
// tries a flow, timeout each). As with probeFlows for TCP, the same ports
// probed twice are the same flows to IPVS: two probes tell which flows
// changed real server.
func probeUDPFlows(addr string, n, base int, timeout time.Duration) probeResult {
	return probeEach(n, base, func(port int) (string, error) {
		f, err := dialUDPFlow(":"+strconv.Itoa(port), addr, timeout)
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
