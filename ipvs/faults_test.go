package ipvs_test

// Fault injection through the in-memory kernel: answers that are garbled,
// truncated, numbered for a request not yet sent, lost to a full receive
// buffer (ENOBUFS), swallowed (EINTR) or never sent (a timeout). Every
// call must end, with an error, and a pipeline must report as done only
// changes the table holds.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/lvskit/lvskit/ipvs"
)

func faultService(i int) ipvs.Service {
	return ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(i%250 + 1)}),
		Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
}

// fault is one way the kernel's answers go wrong.
type fault struct {
	name  string
	apply func(k *fakeKernel)
	dumps bool // applies to dump answers only (acks carry no attributes)
}

var faults = []fault{
	{"message length past the datagram", func(k *fakeKernel) {
		k.mangle = func(d []byte) []byte { binary.NativeEndian.PutUint32(d, uint32(len(d)+100)); return d }
	}, false},
	{"garbled attribute length", func(k *fakeKernel) {
		k.mangle = func(d []byte) []byte {
			if len(d) > 22 && binary.NativeEndian.Uint16(d[4:]) == testFamilyID {
				binary.NativeEndian.PutUint16(d[20:], 0xfff0)
			}
			return d
		}
	}, true},
	{"truncated datagram", func(k *fakeKernel) {
		k.mangle = func(d []byte) []byte { return d[:len(d)/2] }
	}, false},
	{"future sequence number", func(k *fakeKernel) {
		k.mangle = func(d []byte) []byte {
			for m := d; len(m) >= 16; {
				l := int(binary.NativeEndian.Uint32(m))
				binary.NativeEndian.PutUint32(m[8:], binary.NativeEndian.Uint32(m[8:])+7)
				if l < 16 || l > len(m) {
					break
				}
				m = m[(l+3)&^3:]
			}
			return d
		}
	}, false},
	{"ENOBUFS", func(k *fakeKernel) { k.enobufs = 1 }, false},
	{"no answer (timeout)", func(k *fakeKernel) { k.silent = true }, false},
	{"swallowed answer (EINTR)", func(k *fakeKernel) {
		for _, c := range []ipvs.Op{ipvs.CmdNewService, ipvs.CmdGetService, ipvs.CmdGetDest} {
			k.swallow[c] = true
			k.silent = true // dumps: nothing answers either
		}
	}, false},
}

// ended runs f and fails the test if it does not return: the fake never
// blocks, so a client that loops on bad answers would hang here. The bound
// is on the real clock: such a client never blocks, so fake time would
// never pass.
func ended(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: still running after 20 s: the client hangs on a bad answer", what)
		return nil
	}
}

func TestFaultsEndInErrors(t *testing.T) {
	ops := []struct {
		name string
		dump bool
		run  func(c *ipvs.Conn, k *fakeKernel) error
	}{
		{"Services", true, func(c *ipvs.Conn, k *fakeKernel) error { _, err := c.Services(); return err }},
		{"Destinations", true, func(c *ipvs.Conn, k *fakeKernel) error {
			_, err := c.Destinations(faultService(0))
			return err
		}},
		{"Exec", false, func(c *ipvs.Conn, k *fakeKernel) error {
			s := faultService(100)
			return c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s})
		}},
		{"Pipeline", false, func(c *ipvs.Conn, k *fakeKernel) error {
			p := c.Pipeline(8)
			var reported []int
			var failed error
			for i := range 40 {
				s := faultService(100 + i)
				if err := p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}, func(err error) {
					if err == nil {
						reported = append(reported, 100+i)
					} else if failed == nil {
						failed = err
					}
				}); err != nil {
					failed = errors.Join(failed, err)
					break
				}
			}
			if err := p.Flush(); err != nil {
				failed = errors.Join(failed, err)
			}
			// What was reported done is in the table.
			svcs, _ := k.fake.Services()
			for _, i := range reported {
				want := faultService(i)
				if !slices.ContainsFunc(svcs, func(s ipvs.ServiceEntry) bool { return s.Addr == want.Addr }) {
					return fmt.Errorf("%w: service %d", errNotInTable, i)
				}
			}
			if failed == nil {
				return nil
			}
			return failed
		}},
	}
	for _, f := range faults {
		for _, op := range ops {
			if f.dumps && !op.dump {
				continue
			}
			t.Run(f.name+"/"+op.name, func(t *testing.T) {
				k := newFakeKernel()
				for i := range 5 {
					s := faultService(i)
					if err := k.fake.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
						t.Fatal(err)
					}
					d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.AddrFrom4([4]byte{192, 168, 0, 1}), Port: 80, Weight: 1}
					if err := k.fake.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}); err != nil {
						t.Fatal(err)
					}
				}
				c := openFake(t, k)
				f.apply(k)
				err := ended(t, op.name, func() error { return op.run(c, k) })
				if err == nil {
					t.Fatalf("%s succeeded despite %s", op.name, f.name)
				}
				if errors.Is(err, errNotInTable) {
					t.Fatal(err)
				}
				t.Logf("%v", err)
				// The connection is not trusted afterwards, or still answers
				// correctly: never a wrong listing.
				k.mangle, k.silent, k.enobufs = nil, false, 0
				clear(k.swallow)
				svcs, err := c.Services()
				if err == nil && len(svcs) < 5 {
					t.Errorf("after the fault, Services returned %d services without an error", len(svcs))
				}
			})
		}
	}
}

var errNotInTable = errors.New("reported done but not in the table")

// FuzzNetlinkReplies: the in-memory kernel's answers, with bytes flipped
// and datagrams cut as the input says, go through every decoder of the
// client. Each call must end (the fake never blocks) without a panic, and
// with the input empty every answer must be right.
func FuzzNetlinkReplies(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 20, 0xff})
	f.Add([]byte{1, 4, 0x80, 3, 30, 1})
	f.Add([]byte{2, 40, 7, 0, 0, 0})
	f.Add([]byte{0, 0, 0xff, 0, 1, 0xff, 0, 2, 0xff, 0, 3, 0xff})
	f.Fuzz(func(t *testing.T, edits []byte) {
		k := newFakeKernel()
		k.perDump = 2
		for i := range 4 {
			s := faultService(i)
			if err := k.fake.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
				t.Fatal(err)
			}
			d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.AddrFrom4([4]byte{192, 168, 0, byte(i + 1)}), Port: 80, Weight: 1, FwdMethod: ipvs.FwdMasq}
			if err := k.fake.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}); err != nil {
				t.Fatal(err)
			}
		}
		c, err := ipvs.OpenTransportForTest(k, testPort)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Each edit is (datagram number, offset, value): XOR the byte,
		// or with value 0 cut the datagram there.
		n := 0
		k.mangle = func(d []byte) []byte {
			for e := edits; len(e) >= 3; e = e[3:] {
				if int(e[0]) != n {
					continue
				}
				off := int(e[1]) % (len(d) + 1)
				if e[2] == 0 {
					d = d[:off]
				} else if off < len(d) {
					d[off] ^= e[2]
				}
			}
			n++
			return d
		}
		svcs, errS := c.Services()
		for _, s := range svcs {
			_, _ = c.Destinations(s.Service)
		}
		_, _ = c.Timeouts()
		_, _ = c.Daemons()
		s := faultService(50)
		_ = c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s})
		if len(edits) < 3 && (errS != nil || len(svcs) != 4) {
			t.Errorf("untouched answers: %d services, %v", len(svcs), errS)
		}
	})
}
