package health

import (
	"errors"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMarkControl dials with a mark and reads SO_MARK back from the
// socket; without CAP_NET_ADMIN the dial fails, saying why.
func TestMarkControl(t *testing.T) {
	addr := listenTCP(t, "127.0.0.1")
	d := dialer(0x1234)
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
