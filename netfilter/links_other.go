//go:build !linux

package netfilter

import (
	"errors"
	"net/netip"
)

// Netlink is the real Links; it exists only on Linux.
type Netlink struct{}

var errNotLinux = errors.New("network configuration needs Linux")

func (Netlink) Names() ([]string, error)              { return nil, errNotLinux }
func (Netlink) IsUp(string) (bool, error)             { return false, errNotLinux }
func (Netlink) SetUp(string, bool) error              { return errNotLinux }
func (Netlink) Addrs(string) ([]netip.Prefix, error)  { return nil, errNotLinux }
func (Netlink) AddAddr(string, netip.Prefix) error    { return errNotLinux }
func (Netlink) DelAddr(string, netip.Prefix) error    { return errNotLinux }
func (Netlink) DefaultRoutes(Family) ([]Route, error) { return nil, errNotLinux }
func (Netlink) AddRoute(Route) error                  { return errNotLinux }
func (Netlink) ReplaceRoute(Route) error              { return errNotLinux }
func (Netlink) DelRoute(Route) error                  { return errNotLinux }
