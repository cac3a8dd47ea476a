// Package term answers whether an output is a terminal.
//
// That decides buffering (the C library line-buffers a terminal) and layout
// in the mains of ipvsadm and lvsctl.
package term

import "os"

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool { return isTerminal(f) }
