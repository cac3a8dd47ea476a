package ipvs

import (
	"fmt"
	"testing"
)

// TestEnumNames: each enumeration names its values as its comment says,
// and a value it does not know by its number.
func TestEnumNames(t *testing.T) {
	for _, tc := range []struct {
		v    fmt.Stringer
		want string
	}{
		{AFInet, "inet"}, {AFInet6, "inet6"}, {Family(3), "family 3"},
		{ProtoTCP, "tcp"}, {ProtoUDP, "udp"}, {ProtoSCTP, "sctp"}, {Protocol(1), "protocol 1"}, {Protocol(300), "protocol 300"},
		{FwdMasq, "masq"}, {FwdRoute | 0x100, "route"}, {FwdMethod(5), "method 5"},
		{TunIPIP, "ipip"}, {TunGRE, "gre"}, {TunType(9), "type 9"},
		{TunFlagNoCsum, "nocsum"}, {TunFlagRemCsum, "remcsum"}, {TunFlags(4), "flags 4"},
		{DaemonMaster, "master"}, {DaemonBackup, "backup"}, {DaemonState(0), "state 0"},
		{CmdNewService, "NEW_SERVICE"}, {Op(14), "SET_INFO"}, {Op(99), "IPVS_CMD_99"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("%T(%d): %q, want %q", tc.v, tc.v, got, tc.want)
		}
	}
}
