//go:build !linux

package announce

import (
	"errors"
	"net/netip"
)

// errInUse: a device of that name exists, which another live process
// made.
var errInUse = errors.New("exists: another process announces through it")

// Device is the announcing device of this process.
type Device struct{}

// Open fails: announcing needs Linux's network namespaces.
func Open(name string) (*Device, error) {
	return nil, errors.New("announcing needs Linux")
}

// Name is the device's name.
func (d *Device) Name() string { return "" }

// Set fails: there is no device.
func (d *Device) Set([]netip.Prefix) error { return errors.New("announcing needs Linux") }

// Announced lists nothing.
func (d *Device) Announced() []netip.Prefix { return nil }

// Close does nothing.
func (d *Device) Close() error { return nil }
