package sysenv

import "golang.org/x/sys/unix"

// SmallPages asks the kernel not to back this process's memory with
// transparent huge pages (prctl PR_SET_THP_DISABLE), for the rest of its
// life; the mains call it first. Where THP is "always" (Debian's default)
// each 2 MiB-aligned region of the Go heap that the program touches is
// faulted in as one huge page, so a listing with a few MiB of heap was
// charged 2 MiB per region touched. The programs run for seconds and gain
// nothing from huge pages. Pages faulted before the call stay as they
// are; children (modprobe) inherit the setting, which changes nothing
// for them but their memory use.
func SmallPages() {
	_ = unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0)
}
