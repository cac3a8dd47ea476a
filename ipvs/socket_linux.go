package ipvs

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultTimeout bounds every wait for a kernel answer. The kernel handles
// a request inside the system call that sends it, so an answer that takes
// this long is not coming.
const DefaultTimeout = 30 * time.Second

// rcvBufSize is the receive buffer a Conn asks for: room for thousands of
// queued acknowledgements, so a pipeline's answers are not dropped.
const rcvBufSize = 4 << 20

// Buffer sizes: the kernel builds dump datagrams of at most about 32 KiB
// (it sizes them by the largest buffer a reader offered, capped there);
// acknowledgements are 36 bytes with NETLINK_CAP_ACK.
const (
	bigBuf   = 32 << 10
	smallBuf = 512
)

// Open connects to the IPVS generic netlink family in the calling thread's
// network namespace, the way ipvsadm starts: it resolves the family and
// reads the IPVS version and connection table size (see Info).
//
// Without IPVS in the kernel the error satisfies errors.Is(err,
// unix.ENOPROTOOPT); without CAP_NET_ADMIN the kernel refuses GET_INFO and the
// error satisfies errors.Is(err, unix.EPERM). Open never loads modules.
func Open() (*Conn, error) { return open(ipvsGenlName) }

func open(family string) (*Conn, error) {
	s, err := openSocket()
	if err != nil {
		return nil, &OpError{Op: CmdGetInfo, Err: err}
	}
	c := &Conn{sock: s, port: s.port}
	if err := c.start(family); err != nil {
		s.close()
		return nil, err
	}
	return c, nil
}

// SetTimeout changes how long the Conn waits for an answer (DefaultTimeout
// unless changed). When a wait times out the call fails with an error
// satisfying errors.Is(err, unix.EAGAIN) and the Conn is unusable.
func (c *Conn) SetTimeout(d time.Duration) error {
	s, ok := c.sock.(*socket)
	if !ok {
		return errors.New("ipvs: SetTimeout: not a kernel socket")
	}
	return s.setTimeout(d)
}

// socket is the NETLINK_GENERIC socket behind a Conn.
type socket struct {
	fd      int
	port    uint32 // our netlink port id; every answer is addressed to it
	timeout time.Duration
	bufs    [][]byte
	iovs    []unix.Iovec
	names   []unix.RawSockaddrNetlink
	msgs    []unix.Mmsghdr
	out     [][]byte
}

func openSocket() (*socket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	s := &socket{fd: fd}
	if err := s.setup(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return s, nil
}

func (s *socket) setup() error {
	if err := unix.Bind(s.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}
	sa, err := unix.Getsockname(s.fd)
	if err != nil {
		return fmt.Errorf("netlink getsockname: %w", err)
	}
	nl, ok := sa.(*unix.SockaddrNetlink)
	if !ok {
		return errors.New("netlink getsockname: not a netlink address")
	}
	s.port = nl.Pid
	if err := s.setTimeout(DefaultTimeout); err != nil {
		return err
	}
	// Short acknowledgements (no copy of the request in error answers) keep
	// a pipeline's queued answers small. Kernels before 4.2 lack the
	// option; the larger answers still fit the buffers.
	_ = unix.SetsockoptInt(s.fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	// Every IPVS user holds CAP_NET_ADMIN, which SO_RCVBUFFORCE needs to go
	// beyond net.core.rmem_max; SO_RCVBUF is the fallback.
	if unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBufSize) != nil {
		_ = unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBufSize)
	}
	s.bufs = make([][]byte, recvMany)
	s.iovs = make([]unix.Iovec, recvMany)
	s.names = make([]unix.RawSockaddrNetlink, recvMany)
	s.msgs = make([]unix.Mmsghdr, recvMany)
	s.out = make([][]byte, 0, recvMany)
	s.addBuffers(0, recvQuery, bigBuf)
	return nil
}

// addBuffers gives slots [from, to) receive buffers of size bytes each. The
// small ones only a pipeline needs are added on its first receive.
func (s *socket) addBuffers(from, to, size int) {
	mem := make([]byte, (to-from)*size)
	for i := from; i < to; i++ {
		j := i - from
		s.bufs[i] = mem[j*size : (j+1)*size]
		s.iovs[i].Base = &s.bufs[i][0]
		s.iovs[i].SetLen(size)
		h := &s.msgs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&s.names[i]))
		h.Iov = &s.iovs[i]
		h.Iovlen = 1
	}
}

func (s *socket) setTimeout(d time.Duration) error {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("netlink SO_RCVTIMEO: %w", err)
	}
	s.timeout = d
	return nil
}

func (s *socket) send(b []byte) error {
	for {
		_, err := unix.Write(s.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("netlink send: %w", err)
		}
		return nil
	}
}

// recv reads up to max datagrams with one recvmmsg: it blocks for the
// first (up to the timeout) and takes whatever else is already queued.
func (s *socket) recv(max int) ([][]byte, error) {
	if max > len(s.msgs) {
		max = len(s.msgs)
	}
	if max < 1 {
		max = 1
	}
	if max > recvQuery && s.bufs[recvQuery] == nil {
		s.addBuffers(recvQuery, recvMany, smallBuf)
	}
	for i := 0; i < max; i++ {
		m := &s.msgs[i]
		m.Hdr.Namelen = unix.SizeofSockaddrNetlink
		m.Hdr.Flags = 0
		m.Len = 0
	}
	flags := 0
	if max > 1 {
		flags = unix.MSG_WAITFORONE
	}
	var n uintptr
	for {
		r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(s.fd),
			uintptr(unsafe.Pointer(&s.msgs[0])), uintptr(max), uintptr(flags), 0, 0)
		switch errno {
		case 0:
			n = r
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return nil, fmt.Errorf("no answer from the kernel within %v: %w", s.timeout, unix.EAGAIN)
		default:
			// ENOBUFS: the kernel dropped answers because the receive
			// buffer was full; the conversation cannot be resumed.
			return nil, fmt.Errorf("netlink receive: %w", errno)
		}
		break
	}
	s.out = s.out[:0]
	for i := 0; i < int(n); i++ {
		m := &s.msgs[i]
		if m.Hdr.Flags&unix.MSG_TRUNC != 0 {
			return nil, fmt.Errorf("netlink receive: datagram larger than %d bytes", len(s.bufs[i]))
		}
		if s.names[i].Pid != 0 {
			continue // not from the kernel
		}
		s.out = append(s.out, s.bufs[i][:m.Len])
	}
	return s.out, nil
}

func (s *socket) close() error {
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}
