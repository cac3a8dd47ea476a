package ipvsadm

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestStrerror(t *testing.T) {
	for errno, want := range map[unix.Errno]string{
		unix.ENODEV:  "No such device",
		unix.ERANGE:  "Numerical result out of range",
		unix.EBUSY:   "Device or resource busy",
		unix.ENOBUFS: "No buffer space available",
		unix.EAGAIN:  "Resource temporarily unavailable",
		unix.ENOENT:  "No such file or directory",
		unix.ESRCH:   "No such process",
		unix.EEXIST:  "File exists",
		unix.EIO:     "Input/output error",
		unix.ENXIO:   "No such device or address",
		unix.EBADMSG: "Bad message",
		73:           "RFS specific error",
		81:           ".lib section in a.out corrupted",
		41:           "Unknown error 41",
		133:          "Memory page has hardware error",
		200:          "Unknown error 200",
	} {
		if got := strerror(errno); got != want {
			t.Errorf("strerror(%d) = %q, want %q", errno, got, want)
		}
	}
}

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		op    operation
		errno unix.Errno
		want  string
	}{
		{opAddService, unix.EEXIST, "Service already exists"},
		{opAddDest, unix.EEXIST, "Destination already exists"},
		{opGeneric, unix.EEXIST, "File exists"}, // flush has no rows of its own
		{opUpdateDest, unix.ESRCH, "Service not defined"},
		{opZeroService, unix.ESRCH, "No such service"},
		{opStopDaemon, unix.ESRCH, "No daemon is running"},
		{opStartDaemon, unix.ENODEV, "No such device"},
		{opAddDest, unix.ERANGE, "Numerical result out of range"},
		{opAddService, unix.EPERM, "Permission denied (you must be root)"},
		{opDelDest, unix.EINVAL, "Invalid operation.  Possibly wrong module version, address not unicast, ..."},
		{opGeneric, unix.ENOPROTOOPT, "Protocol not available"},
	} {
		if got := errorText(tc.op, tc.errno); got != tc.want {
			t.Errorf("op %d errno %d: got %q, want %q", tc.op, tc.errno, got, tc.want)
		}
	}
}
