package conformance

// Cases for the connection-sync daemons: start, stop, list, options, errors.

import (
	"errors"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"golang.org/x/sys/unix"
)

var syncGroup = addr("224.0.0.81")

// mustStop stops a daemon. The kernel may stop a daemon whose thread has
// not run yet without answering (see ipvs.ErrNoAnswer); it is stopped all
// the same, which the callers check with Daemons.
func mustStop(t *testing.T, c ipvs.Client, d ipvs.Daemon) {
	t.Helper()
	err := c.Exec(daemonReq(ipvs.CmdDelDaemon, d))
	if err != nil && !(errors.Is(err, ipvs.ErrNoAnswer) && errors.Is(err, unix.EINTR)) {
		t.Fatalf("stop daemon %+v: %v", d, err)
	}
}

func daemonReq(cmd ipvs.Op, d ipvs.Daemon) ipvs.Request {
	return ipvs.Request{Cmd: cmd, Daemon: &d}
}

func testDaemons(t *testing.T, c ipvs.Client) {
	start := func(d ipvs.Daemon) ipvs.Request { return daemonReq(ipvs.CmdNewDaemon, d) }
	stop := func(state ipvs.DaemonState) ipvs.Request {
		return daemonReq(ipvs.CmdDelDaemon, ipvs.Daemon{State: state})
	}
	mustExec(t, c, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 5}))
	master := ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 5, MaxLen: 1472, Group: syncGroup, Port: 8848, TTL: 1}
	expectDaemons(t, c, master)
	expectErrno(t, c, unix.EEXIST, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 6}))

	// The backup buffer follows the interface MTU: lo's 65536 is capped at
	// 65535, less the IPv4 and UDP headers.
	mustExec(t, c, start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", SyncID: 7}))
	backup := ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", SyncID: 7, MaxLen: 65507, Group: syncGroup, Port: 8848, TTL: 1}
	expectDaemons(t, c, master, backup)
	expectErrno(t, c, unix.EEXIST, start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo"}))

	mustStop(t, c, ipvs.Daemon{State: ipvs.DaemonMaster})
	expectDaemons(t, c, backup)
	expectErrno(t, c, unix.ESRCH, stop(ipvs.DaemonMaster))
	// A stop request names only the state; ipvsadm sends an empty
	// interface and its sync id, which the kernel ignores.
	mustStop(t, c, ipvs.Daemon{State: ipvs.DaemonBackup, SyncID: 99})
	expectDaemons(t, c)
	expectErrno(t, c, unix.ESRCH, stop(ipvs.DaemonBackup))
	// Stopped daemons can start again.
	mustExec(t, c, start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", SyncID: 8}))
	expectDaemons(t, c, with(backup, func(d *ipvs.Daemon) { d.SyncID = 8 }))
}

func testDaemonOptions(t *testing.T, c ipvs.Client) {
	start := func(d ipvs.Daemon) ipvs.Request { return daemonReq(ipvs.CmdNewDaemon, d) }
	stopAll := func() {
		mustStop(t, c, ipvs.Daemon{State: ipvs.DaemonMaster})
		mustStop(t, c, ipvs.Daemon{State: ipvs.DaemonBackup})
		expectDaemons(t, c)
	}
	mustExec(t, c,
		start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 255, MaxLen: 1000, Group: addr("239.1.2.3"), Port: 9000, TTL: 3}),
		start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", SyncID: 1, MaxLen: 100}))
	expectDaemons(t, c,
		ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 255, MaxLen: 1000, Group: addr("239.1.2.3"), Port: 9000, TTL: 3},
		// A backup buffer is at least 1024 bytes.
		ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", SyncID: 1, MaxLen: 1024, Group: syncGroup, Port: 8848, TTL: 1})
	stopAll()

	// (An IPv6 group cannot be tested here: lo has no IPv6 multicast
	// route, so the kernel answers ENETUNREACH.)
	mustExec(t, c, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", MaxLen: 65535}),
		start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", MaxLen: 1}))
	expectDaemons(t, c,
		ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", MaxLen: 65507, Group: syncGroup, Port: 8848, TTL: 1},
		ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", MaxLen: 1024, Group: syncGroup, Port: 8848, TTL: 1})
}

func testDaemonErrors(t *testing.T, c ipvs.Client) {
	start := func(d ipvs.Daemon) ipvs.Request { return daemonReq(ipvs.CmdNewDaemon, d) }
	expectErrno(t, c, unix.ENODEV, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "eth0"}))
	expectErrno(t, c, unix.ENODEV, start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: ""}))
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: 3, Interface: "lo"}))
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: 0, Interface: "lo"}))
	// The interface is looked up before the state is examined.
	expectErrno(t, c, unix.ENODEV, start(ipvs.Daemon{State: 3, Interface: "eth0"}))
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", Group: addr("10.0.0.1")}))
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", Group: addr("2001:db8::1")}))
	// The group is checked before the interface.
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "eth0", Group: addr("10.0.0.1")}))
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "sixteen-chars-xx"}))
	expectErrno(t, c, unix.EINVAL, ipvs.Request{Cmd: ipvs.CmdNewDaemon})
	expectErrno(t, c, unix.EINVAL, ipvs.Request{Cmd: ipvs.CmdDelDaemon})
	expectErrno(t, c, unix.ESRCH, daemonReq(ipvs.CmdDelDaemon, ipvs.Daemon{State: ipvs.DaemonMaster}))
	expectErrno(t, c, unix.ESRCH, daemonReq(ipvs.CmdDelDaemon, ipvs.Daemon{State: ipvs.DaemonBackup}))
	expectErrno(t, c, unix.EINVAL, daemonReq(ipvs.CmdDelDaemon, ipvs.Daemon{State: 3}))
	expectDaemons(t, c)
	// With a master running, an unknown interface is still reported first
	// (the interface is looked up before the running daemon is noticed),
	// and a refused start leaves the running daemon's settings alone.
	mustExec(t, c, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo"}))
	expectErrno(t, c, unix.ENODEV, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "eth0"}))
	expectErrno(t, c, unix.EEXIST, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 3, MaxLen: 9000}))
	expectDaemons(t, c, ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", MaxLen: 1472, Group: syncGroup, Port: 8848, TTL: 1})
}

func testDaemonMixed(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	six := with(dst("2001:db8::10", 80), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdTunnel })
	master := ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo"}
	mustExec(t, c, addSvc(s), addDst(s, six))
	// The sync protocol cannot carry mixed-family destinations.
	expectErrno(t, c, unix.EINVAL, daemonReq(ipvs.CmdNewDaemon, master))
	mustExec(t, c, delDst(s, six))
	mustExec(t, c, daemonReq(ipvs.CmdNewDaemon, master))
	expectErrno(t, c, unix.EINVAL, addDst(s, six))
	// Same-family destinations are fine, and deleting needs no check.
	mustExec(t, c, addDst(s, dst("192.168.0.1", 80)), delDst(s, dst("192.168.0.1", 80)))
	expectDests(t, c, s)
}
