//go:build !linux

package term

import "os"

// isTerminal treats a character device as a terminal: close enough where
// the programs cannot reach IPVS anyway.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
