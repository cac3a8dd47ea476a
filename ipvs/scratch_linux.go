package ipvs

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// OpenScratch is Open in a new network namespace of its own: an empty IPVS
// table, with lo up (the kernel refuses some destinations while lo is
// down), to try changes in before making them for real. The namespace
// lives as long as the Conn's sockets; the caller's thread never leaves
// its own namespace (the work is done on a separate, locked thread).
//
// Creating the namespace needs CAP_SYS_ADMIN; without it the error
// satisfies errors.Is(err, unix.EPERM). Errors making the namespace are
// not *OpError; Open's errors there (no IPVS in the kernel, ...) are.
func OpenScratch() (*Conn, error) {
	type result struct {
		c   *Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		c, back, err := openScratch()
		if back {
			runtime.UnlockOSThread()
		}
		// Otherwise the thread stays locked and ends with this goroutine,
		// instead of serving others from the scratch namespace.
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// openScratch runs on a locked thread. back reports whether the thread is
// in its original namespace again.
func openScratch() (c *Conn, back bool, err error) {
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, fmt.Errorf("scratch network namespace: opening this thread's namespace: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("scratch network namespace: unshare(CLONE_NEWNET): %w", err)
	}
	if lerr := loopbackUp(); lerr != nil {
		err = fmt.Errorf("scratch network namespace: bringing lo up: %w", lerr)
	} else {
		// Every socket of the Conn is made here, so it belongs to the
		// scratch namespace for its whole life.
		c, err = Open()
	}
	back = unix.Setns(orig, unix.CLONE_NEWNET) == nil
	return c, back, err
}

// loopbackUp sets IFF_UP on lo in the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
