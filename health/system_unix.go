//go:build unix

package health

import (
	"os"
	"syscall"
)

func statOwner(name string) (FileInfo, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return FileInfo{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileInfo{}, &os.PathError{Op: "stat", Path: name, Err: syscall.ENOTSUP}
	}
	return FileInfo{Mode: fi.Mode(), UID: st.Uid}, nil
}
