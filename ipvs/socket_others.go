//go:build !linux

package ipvs

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Open reports that IP Virtual Server needs Linux: the package builds on
// other systems (the fake, the encoder and the types are portable) but has
// no kernel to talk to there. The error satisfies errors.Is(err,
// unix.ENOPROTOOPT), what a Linux kernel without IPVS answers.
func Open() (*Conn, error) {
	return nil, &OpError{Op: CmdGetInfo, Err: fmt.Errorf("IP Virtual Server is not available on %s: %w", runtime.GOOS, unix.ENOPROTOOPT)}
}

// OpenScratch reports, as Open does, that IP Virtual Server needs Linux.
func OpenScratch() (*Conn, error) { return Open() }
