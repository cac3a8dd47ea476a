package ipvsadm

import (
	"errors"
	"strconv"

	"github.com/lvskit/lvskit/ipvsadm/cmdline"
	"golang.org/x/sys/unix"
)

// operation names the libipvs call whose failure is being reported; some
// errnos mean different things for different calls (ipvs_strerror's
// table is keyed by the last call made).
type operation int

const (
	opGeneric operation = iota // ipvs_init, flush, timeouts: only the generic rows apply
	opAddService
	opUpdateService
	opDelService
	opZeroService
	opAddDest
	opUpdateDest
	opDelDest
	opStartDaemon
	opStopDaemon
	opGetServices
	opGetDests
	opGetService
)

// errnoMessage is one row of ipvsadm's ipvs_strerror table.
type errnoMessage struct {
	op      operation // opGeneric rows match every operation
	errno   unix.Errno
	message string
}

// errnoMessages is ipvs_strerror's table; the first matching row wins.
var errnoMessages = []errnoMessage{
	{opAddService, unix.EEXIST, "Service already exists"},
	{opAddService, unix.ENOENT, "Scheduler or persistence engine not found"},
	{opUpdateService, unix.ESRCH, "No such service"},
	{opUpdateService, unix.ENOENT, "Scheduler or persistence engine not found"},
	{opDelService, unix.ESRCH, "No such service"},
	{opZeroService, unix.ESRCH, "No such service"},
	{opAddDest, unix.ESRCH, "Service not defined"},
	{opAddDest, unix.EEXIST, "Destination already exists"},
	{opUpdateDest, unix.ESRCH, "Service not defined"},
	{opUpdateDest, unix.ENOENT, "No such destination"},
	{opDelDest, unix.ESRCH, "Service not defined"},
	{opDelDest, unix.ENOENT, "No such destination"},
	{opStartDaemon, unix.EEXIST, "Daemon has already run"},
	{opStopDaemon, unix.ESRCH, "No daemon is running"},
	{opGetServices, unix.ESRCH, "No such service"},
	{opGetDests, unix.ESRCH, "No such service"},
	{opGetService, unix.ESRCH, "No such service"},
	{opGeneric, unix.EPERM, "Permission denied (you must be root)"},
	{opGeneric, unix.EINVAL, "Invalid operation.  Possibly wrong module version, address not unicast, ..."},
	{opGeneric, unix.ENOPROTOOPT, "Protocol not available"},
	{opGeneric, unix.ENOMEM, "Memory allocation problem"},
	{opGeneric, unix.EOPNOTSUPP, "Operation not supported with IPv6"},
	{opGeneric, unix.EAFNOSUPPORT, "Operation not supported with specified address family"},
	{opGeneric, unix.EMSGSIZE, "Module is wrong version"},
}

// errnoOf extracts the errno behind err. Like libipvs, which sets errno to
// EINVAL when it fails for a reason of its own, anything that is not an
// errno counts as EINVAL.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EINVAL
}

// errorText is ipvs_strerror: ipvsadm's message for err after operation op.
func errorText(op operation, err error) string {
	errno := errnoOf(err)
	for _, row := range errnoMessages {
		if row.errno == errno && (row.op == opGeneric || row.op == op) {
			return row.message
		}
	}
	return strerror(errno)
}

// commandErrorText is the message ipvsadm prints when the kernel refuses
// the request of a cmd line (for the pipelined engine, which sends
// requests itself).
func commandErrorText(cmd cmdline.Command, err error) string {
	return errorText(operationOf(cmd), err)
}

// strerrorExceptions are glibc 2.36 texts that cannot be derived from Go's
// errno strings.
var strerrorExceptions = map[unix.Errno]string{
	0:   "Success",
	133: "Memory page has hardware error",
}

// strerror is glibc's strerror in the C locale. Go's errno strings are
// glibc's texts with the first letter lowered when the second is lower case
// too, so raising it again gives glibc's text back; numbers glibc does not
// know give "Unknown error N".
func strerror(errno unix.Errno) string {
	if s, ok := strerrorExceptions[errno]; ok {
		return s
	}
	s := errno.Error()
	if s == "" || s == "errno "+strconv.Itoa(int(errno)) {
		return "Unknown error " + strconv.Itoa(int(errno))
	}
	if len(s) > 1 && s[0] >= 'a' && s[0] <= 'z' && s[1] >= 'a' && s[1] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	return s
}
