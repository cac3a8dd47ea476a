package ipvs

import (
	"time"

	"golang.org/x/sys/unix"
)

// OpenFamilyForTest opens a Conn that resolves the generic netlink family
// name instead of "IPVS", to see how Open reports a missing family.
func OpenFamilyForTest(name string) (*Conn, error) { return open(name) }

// WaitForNothingForTest waits for an answer that was never asked for, to
// see how the receive timeout is reported.
func WaitForNothingForTest(c *Conn, timeout time.Duration) error {
	if err := c.SetTimeout(timeout); err != nil {
		return err
	}
	_, err := c.sock.recv(recvMany)
	return err
}

// ShrinkReceiveBufferForTest makes the socket's receive buffer tiny, so a
// large pipeline window overruns it.
func ShrinkReceiveBufferForTest(c *Conn) error {
	return unix.SetsockoptInt(c.sock.(*socket).fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 0)
}
