package sysenv

import (
	"os"

	"golang.org/x/sys/unix"
)

// SmallPages asks the kernel not to back this process's memory with
// transparent huge pages (prctl PR_SET_THP_DISABLE), for the rest of its
// life; the mains call it first. Where THP is "always" (Debian's default)
// each 2 MiB-aligned region of the Go heap that the program touches is
// faulted in as one huge page, so a listing with a few MiB of heap was
// charged 2 MiB per region touched. The programs run for seconds and gain
// nothing from huge pages (decision 0011). Pages faulted before the call stay as they
// are; children (modprobe) inherit the setting, which changes nothing
// for them but their memory use.
func SmallPages() {
	_ = unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0)
}

// SmallPagesFromStart is SmallPages for a program whose static data spans
// a whole 2 MiB-aligned region (lvsctl links the TLS and HTTP stacks): the
// kernel backs such a region with a huge page at the runtime's first
// touch, before main runs. It sets the prctl, which execve keeps, and
// runs the program again, once; if that fails the program goes on as it
// is.
func SmallPagesFromStart() {
	if v, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0); err != nil || v == 1 {
		return
	}
	if unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0) != nil {
		return
	}
	_ = unix.Exec("/proc/self/exe", os.Args, os.Environ())
}
