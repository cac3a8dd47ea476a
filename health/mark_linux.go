package health

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// markControl returns a net.Dialer Control that sets SO_MARK to mark.
func markControl(mark uint32) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
		}); err != nil {
			return &markError{mark, err}
		}
		if serr != nil {
			return &markError{mark, serr}
		}
		return nil
	}
}
