package sysenv

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DieOfSegfault ends the process the way ipvsadm 1.31 ends for "-b ,": killed
// by SIGSEGV, so that a shell reports status 139 and prints its
// "Segmentation fault" notice exactly as for the real binary. Go's runtime
// ignores a SIGSEGV sent by kill, so the default action is restored first.
func DieOfSegfault() {
	// The kernel's struct sigaction with every field zero is SIG_DFL, no
	// flags, empty mask (the same layout on amd64 and arm64).
	var act [4]uint64
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGSEGV), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	unix.Tgkill(unix.Getpid(), unix.Gettid(), unix.SIGSEGV)
	os.Exit(128 + 11) // what a shell reports for SIGSEGV
}
