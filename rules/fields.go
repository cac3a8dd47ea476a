package rules

// This file compares a service's or a destination's settings field by field.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/notation"
)

// serviceFields lists the settings of a service that differ. The values
// are compared first and formatted only when they differ: a plan compares
// every service of a large table.
func serviceFields(old, new *ipvs.Service) []Field {
	if old.Scheduler == new.Scheduler && old.Flags&^ipvs.FlagHashed == new.Flags&^ipvs.FlagHashed &&
		old.Timeout == new.Timeout && old.Netmask == new.Netmask && old.PEName == new.PEName {
		return nil
	}
	var f []Field
	add := func(name, o, n string) {
		if o != n {
			f = append(f, Field{Name: name, Old: o, New: n})
		}
	}
	add("scheduler", old.Scheduler, new.Scheduler)
	add("flags", FlagsText(old), FlagsText(new))
	add("timeout", strconv.FormatUint(uint64(old.Timeout), 10), strconv.FormatUint(uint64(new.Timeout), 10))
	add("netmask", netmaskText(old), netmaskText(new))
	add("pe", orDash(old.PEName), orDash(new.PEName))
	return f
}

// FlagsText names a service's flags: persistent, ops and the scheduler
// flags as -b writes them; "-" for none.
func FlagsText(s *ipvs.Service) string {
	var parts []string
	if s.Flags&ipvs.FlagPersistent != 0 {
		parts = append(parts, "persistent")
	}
	if s.Flags&ipvs.FlagOnePacket != 0 {
		parts = append(parts, "ops")
	}
	parts = append(parts, notation.SchedFlagNames(s.Scheduler, s.Flags)...)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func netmaskText(s *ipvs.Service) string {
	if s.Family == ipvs.AFInet6 {
		return strconv.Itoa(int(int32(s.Netmask)))
	}
	m := s.Netmask
	return fmt.Sprintf("%d.%d.%d.%d", byte(m>>24), byte(m>>16), byte(m>>8), byte(m))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// destFields lists the settings of a destination that differ (compared
// first, formatted only when they differ). Tunnel settings count only
// where the destination is tunnelled, the only place the kernel uses
// them (and the kernel's getsockopt interface, which ipvs.Conn reads
// plans with, reports them zero elsewhere).
func destFields(old, new *ipvs.Destination) []Field {
	sameTunnel := new.FwdMethod&7 != ipvs.FwdTunnel ||
		old.TunType == new.TunType && old.TunPort == new.TunPort && old.TunFlags == new.TunFlags
	if old.FwdMethod&7 == new.FwdMethod&7 && old.Weight == new.Weight && old.UThreshold == new.UThreshold &&
		old.LThreshold == new.LThreshold && sameTunnel {
		return nil
	}
	var f []Field
	add := func(name, o, n string) {
		if o != n {
			f = append(f, Field{Name: name, Old: o, New: n})
		}
	}
	u := func(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
	add("method", MethodName(old.FwdMethod), MethodName(new.FwdMethod))
	add("weight", strconv.Itoa(int(int32(old.Weight))), strconv.Itoa(int(int32(new.Weight))))
	add("u-threshold", u(old.UThreshold), u(new.UThreshold))
	add("l-threshold", u(old.LThreshold), u(new.LThreshold))
	if old.FwdMethod&7 == ipvs.FwdTunnel || new.FwdMethod&7 == ipvs.FwdTunnel {
		add("tun-type", u(uint32(old.TunType)), u(uint32(new.TunType)))
		add("tun-port", u(uint32(old.TunPort)), u(uint32(new.TunPort)))
		add("tun-flags", u(uint32(old.TunFlags)), u(uint32(new.TunFlags)))
	}
	return f
}

// MethodName names a forwarding method as the JSON document does: masq,
// local, tunnel, route.
func MethodName(fwd ipvs.FwdMethod) string { return strings.ToLower(notation.Method(fwd).Column) }
