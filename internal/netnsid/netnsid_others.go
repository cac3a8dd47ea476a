//go:build !linux

package netnsid

// cookie is 0 off Linux, which alone has network namespaces.
func cookie() (uint64, error) { return 0, nil }
