package announce

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Device is the announcing device of this process.
type Device struct {
	name string
	link netlink.Link
	ns   netns.NsHandle // the peer's namespace; this process alone holds it
	have []netip.Prefix
}

// errInUse: a device of that name exists, which another live process
// made (a device of a process that ended is gone with it).
var errInUse = errors.New("exists: another process announces through it")

// Open makes the device name, up and without addresses, in the calling
// thread's network namespace.
func Open(name string) (*Device, error) {
	if len(name) == 0 || len(name) > unix.IFNAMSIZ-3 {
		return nil, fmt.Errorf("announce device %q: 1 to %d characters", name, unix.IFNAMSIZ-3)
	}
	if _, err := netlink.LinkByName(name); err == nil {
		return nil, fmt.Errorf("announce device %s: %w", name, errInUse)
	}
	ns, err := privateNetns()
	if err != nil {
		return nil, fmt.Errorf("announce device %s: %w", name, err)
	}
	d := &Device{name: name, ns: ns}
	peer := name + "-p"
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer, PeerNamespace: netlink.NsFd(ns)}
	if err := netlink.LinkAdd(veth); err != nil {
		ns.Close()
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("announce device %s: %w", name, errInUse)
		}
		return nil, fmt.Errorf("announce device %s: %w", name, err)
	}
	fail := func(err error) (*Device, error) {
		d.Close()
		return nil, fmt.Errorf("announce device %s: %w", name, err)
	}
	if d.link, err = netlink.LinkByName(name); err != nil {
		return fail(err)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	p, err := h.LinkByName(peer)
	if err != nil {
		return fail(err)
	}
	// Both ends up: the device has a carrier, which routing daemons may
	// ask of an interface before they export its addresses.
	if err := h.LinkSetUp(p); err != nil {
		return fail(err)
	}
	if err := netlink.LinkSetUp(d.link); err != nil {
		return fail(err)
	}
	return d, nil
}

// privateNetns makes a network namespace held by the returned handle
// alone (close-on-exec: programs the process starts do not keep it). The
// thread that makes it never runs anything else: it ends with its
// goroutine, so no thread of the process is left in that namespace.
func privateNetns() (netns.NsHandle, error) {
	type made struct {
		ns  netns.NsHandle
		err error
	}
	c := make(chan made)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		ns, err := netns.New()
		c <- made{ns, err}
	}()
	m := <-c
	return m.ns, m.err
}

// Name is the device's name.
func (d *Device) Name() string { return d.name }

// Set makes the device's addresses exactly want: each a host prefix (/32,
// /128) or a network; what is there already stays untouched.
func (d *Device) Set(want []netip.Prefix) error {
	for _, p := range want {
		if !slices.Contains(d.have, p) {
			if err := netlink.AddrAdd(d.link, addr(p)); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("announcing %s on %s: %w", p, d.name, err)
			}
			d.have = append(d.have, p)
		}
	}
	for i := 0; i < len(d.have); {
		p := d.have[i]
		if slices.Contains(want, p) {
			i++
			continue
		}
		if err := netlink.AddrDel(d.link, addr(p)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("withdrawing %s from %s: %w", p, d.name, err)
		}
		d.have = slices.Delete(d.have, i, i+1)
	}
	return nil
}

// Announced lists the prefixes on the device, in the order they came.
func (d *Device) Announced() []netip.Prefix { return slices.Clone(d.have) }

func addr(p netip.Prefix) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
}

// Close deletes the device, withdrawing every address at once.
func (d *Device) Close() error {
	var err error
	if d.link != nil {
		err = netlink.LinkDel(d.link)
	}
	d.ns.Close()
	d.have = nil
	return err
}
