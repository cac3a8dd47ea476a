package health

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMarkControl dials with a mark and reads SO_MARK back from the
// socket; without CAP_NET_ADMIN the dial fails, saying why.
func TestMarkControl(t *testing.T) {
	addr := listenTCP(t, "127.0.0.1")
	d, err := dialer(Target{Mark: 0x1234, Spec: Spec{Type: "tcp"}})
	if err != nil {
		t.Fatal(err)
	}
	set := d.Control
	var got int
	var getErr error
	d.Control = func(network, address string, c syscall.RawConn) error {
		if err := set(network, address, c); err != nil {
			return err
		}
		return c.Control(func(fd uintptr) { got, getErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK) })
	}
	conn, err := d.Dial("tcp", addr.String())
	if err != nil {
		if !errors.Is(err, syscall.EPERM) || errText(err) != "set SO_MARK 4660: operation not permitted" {
			t.Fatalf("dial with a mark: %v (%s)", err, errText(err))
		}
		return
	}
	conn.Close()
	if getErr != nil || got != 0x1234 {
		t.Errorf("SO_MARK read back %#x (%v), want 0x1234", got, getErr)
	}
}

// TestDialerThrough: a via-vip probe leaves from the source of the route
// toward the real server it crosses (127.0.0.2 on lo: 127.0.0.1), not
// from the virtual address.
func TestDialerThrough(t *testing.T) {
	for _, typ := range []string{"tcp", "udp"} {
		d, err := dialer(Target{Mark: 7, Through: netip.MustParseAddr("127.0.0.2"), Spec: Spec{Type: typ}})
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if d.LocalAddr != nil {
			got = d.LocalAddr.Network() + " " + d.LocalAddr.String()
		}
		if want := typ + " 127.0.0.1:0"; got != want {
			t.Errorf("%s: local address %q, want %q", typ, got, want)
		}
	}
	if d, err := dialer(Target{Mark: 7, Through: netip.MustParseAddr("::1"), Spec: Spec{Type: "tcp"}}); err != nil || d.LocalAddr.String() != "[::1]:0" {
		t.Errorf("through ::1: local address %v (%v), want [::1]:0", d, err)
	}
	if d, _ := dialer(Target{Mark: 7, Spec: Spec{Type: "tcp"}}); d.LocalAddr != nil {
		t.Errorf("no real server to cross: local address %v, want none", d.LocalAddr)
	}
}

func TestProbeWithMark(t *testing.T) {
	addr := listenTCP(t, "127.0.0.1")
	err := probe(t, addr, Spec{Type: "tcp"})
	wantPass(t, "tcp without mark", err)
	err = Probe(t.Context(), Target{Addr: addr, Mark: 7, Spec: Spec{Type: "tcp"}})
	if err != nil && err.Error() != "connect "+addr.String()+": set SO_MARK 7: operation not permitted" {
		t.Errorf("tcp with mark: %v", err)
	}
	if err == nil && unix.Geteuid() != 0 {
		t.Errorf("tcp with mark passed for uid %d", unix.Geteuid())
	}
}
