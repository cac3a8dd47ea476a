package ipvs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// defaultTimeout bounds every wait for a kernel answer. The kernel handles
// a request inside the system call that sends it, so an answer that takes
// this long is not coming.
const defaultTimeout = 30 * time.Second

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
	s, err := openSocket(bigBuf, rcvBufSize)
	if err != nil {
		return nil, &OpError{Op: CmdGetInfo, Err: err}
	}
	// Opened now, on the caller's thread: a socket belongs to the network
	// namespace of the thread that creates it.
	d, err := openDumpSocket()
	if err != nil {
		s.close()
		return nil, &OpError{Op: CmdGetInfo, Err: err}
	}
	c := &Conn{sock: s, port: s.port, dumps: d, dumpsPort: d.port}
	// The legacy interface is optional: without an IPv4 socket every read
	// goes over netlink.
	if l, err := openLegacySocket(); err == nil {
		c.legacy = l
	}
	if err := c.start(family); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// openDumpSocket opens the socket for destination dumps. The kernel sizes
// each dump datagram by the largest buffer its reader ever offered, and
// datagrams larger than 8 KiB come from the page allocator instead of a
// slab cache, so small buffers make destination dumps cheaper than the
// 32 KiB the main socket needs (decision 0007). The service dump stays on
// the main socket: it resumes by skipping the services already sent, so
// small datagrams make it slower. A page is the smallest buffer that
// holds any dump datagram (NLMSG_GOODSIZE is less); beyond 8 KiB pages it
// is 8 KiB.
func openDumpSocket() (*socket, error) {
	return openSocket(min(os.Getpagesize(), 8192), 0)
}

// SetTimeout changes how long the Conn waits for an answer (30 seconds,
// defaultTimeout, unless changed). When a wait times out the call fails
// with an error satisfying errors.Is(err, unix.EAGAIN) and the Conn is
// unusable.
func (c *Conn) SetTimeout(d time.Duration) error {
	s, ok := c.sock.(*socket)
	if !ok {
		return errors.New("ipvs: SetTimeout: not a kernel socket")
	}
	if ds, ok := c.dumps.(*socket); ok {
		if err := ds.setTimeout(d); err != nil {
			return err
		}
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

// openSocket opens a NETLINK_GENERIC socket whose recvmmsg offers
// datagram buffers of bufSize bytes (recvQuery of them), with a receive
// queue of rcvBuf bytes (0: the system's default).
func openSocket(bufSize, rcvBuf int) (*socket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	s := &socket{fd: fd}
	if err := s.setup(bufSize, rcvBuf); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return s, nil
}

func (s *socket) setup(bufSize, rcvBuf int) error {
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
	if err := s.setTimeout(defaultTimeout); err != nil {
		return err
	}
	// Short acknowledgements (no copy of the request in error answers) keep
	// a pipeline's queued answers small. Kernels before 4.2 lack the
	// option; the larger answers still fit the buffers.
	_ = unix.SetsockoptInt(s.fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	// Every IPVS user holds CAP_NET_ADMIN, which SO_RCVBUFFORCE needs to go
	// beyond net.core.rmem_max; SO_RCVBUF is the fallback.
	if rcvBuf > 0 && unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
		_ = unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
	}
	s.bufs = make([][]byte, recvMany)
	s.iovs = make([]unix.Iovec, recvMany)
	s.names = make([]unix.RawSockaddrNetlink, recvMany)
	s.msgs = make([]unix.Mmsghdr, recvMany)
	s.out = make([][]byte, 0, recvMany)
	s.addBuffers(0, recvQuery, bufSize)
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

// legacySocket is the IPv4 datagram socket the kernel's getsockopt
// interface to IPVS is reached through (see appendDestsLegacy); like the
// netlink sockets it belongs to the namespace it was opened in.
type legacySocket struct{ fd int }

func openLegacySocket() (*legacySocket, error) {
	if strconv.IntSize != 64 {
		// The structures' 64-bit counters are aligned differently there.
		return nil, errors.New("ipvs: the getsockopt structures are read for 64-bit programs only")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &legacySocket{fd: fd}, nil
}

func (l *legacySocket) getsockopt(opt int, buf []byte) error {
	n := uint32(len(buf))
	for {
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(l.fd), unix.IPPROTO_IP, uintptr(opt),
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}

func (l *legacySocket) close() error {
	if l.fd < 0 {
		return nil
	}
	err := unix.Close(l.fd)
	l.fd = -1
	return err
}
