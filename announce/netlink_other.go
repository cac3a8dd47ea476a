//go:build !linux

package announce

// netlinkRoute stands in for Linux's NETLINK_ROUTE, so that the package
// builds and is vetted elsewhere (make check vets for darwin); there the
// netlink and netns packages return their ErrNotImplemented, and Open
// fails with it.
const netlinkRoute = 0
