package ipvs

// Transport is what a host test puts in place of the kernel socket.
type Transport interface {
	// Send receives one datagram of requests from the client.
	Send(b []byte) error
	// Recv returns up to max queued answer datagrams; it fails (like a
	// receive timeout) when none are queued.
	Recv(max int) ([][]byte, error)
	Close() error
}

type testTransport struct{ t Transport }

func (x testTransport) send(b []byte) error            { return x.t.Send(b) }
func (x testTransport) recv(max int) ([][]byte, error) { return x.t.Recv(max) }
func (x testTransport) close() error                   { return x.t.Close() }

// OpenTransportForTest opens a Conn over t as Open does over the kernel
// socket; port is the netlink port id answers must be addressed to.
func OpenTransportForTest(t Transport, port uint32) (*Conn, error) {
	c := &Conn{sock: testTransport{t}, port: port}
	if err := c.start(ipvsGenlName); err != nil {
		return nil, err
	}
	return c, nil
}

// OpenTransportsForTest is OpenTransportForTest with a second transport
// for destination dumps, as Open has a second socket; answers on both come
// addressed to port.
func OpenTransportsForTest(t, dumps Transport, port uint32) (*Conn, error) {
	c := &Conn{sock: testTransport{t}, port: port, dumps: testTransport{dumps}, dumpsPort: port}
	if err := c.start(ipvsGenlName); err != nil {
		return nil, err
	}
	return c, nil
}

// SmallDumpLimit is how many datagrams a destination dump may take on the
// second transport.
const SmallDumpLimit = smallDumpLimit

// LegacyTransport is what a host test puts in place of the kernel's
// getsockopt interface (see appendDestsLegacy).
type LegacyTransport interface {
	Getsockopt(opt int, buf []byte) error
}

type testLegacy struct{ t LegacyTransport }

func (x testLegacy) getsockopt(opt int, b []byte) error { return x.t.Getsockopt(opt, b) }
func (x testLegacy) close() error                       { return nil }

// UseLegacyForTest gives c the legacy interface l; nil takes it away, as
// a kernel that refuses it does.
func UseLegacyForTest(c *Conn, l LegacyTransport) {
	c.legacy = nil
	if l != nil {
		c.legacy = testLegacy{l}
	}
}

// LegacyReadsForTest reports how many services' destinations c has read
// with the legacy interface, and whether c still uses it.
func LegacyReadsForTest(c *Conn) (reads int, enabled bool) { return c.legacyReads, c.legacy != nil }

// The legacy requests a LegacyTransport answers.
const (
	SoGetInfo     = soGetInfo
	SoGetServices = soGetServices
	SoGetService  = soGetService
	SoGetDests    = soGetDests
)

// LegacyBatchLen is how many services one batch of EachDestinations
// holds at most; LegacyBatchHeld, how many destinations.
const (
	LegacyBatchLen  = legacyBatchLen
	LegacyBatchHeld = legacyBatchHeld
)

// LegacyChainForTest returns the kernel's hash chain of svc as
// EachDestinations infers it.
func LegacyChainForTest(svc *Service) (int, bool) { return legacyChain(svc) }

// LegacyBulkCountsForTest reports how many counts in bulk c has taken
// for batches of EachDestinations.
func LegacyBulkCountsForTest(c *Conn) int { return c.legacyBulkCounts }
