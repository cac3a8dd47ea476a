package cmdline

import (
	"strings"
	"testing"
)

func TestOptionTable(t *testing.T) {
	longs, shorts := map[string]bool{}, map[rune]bool{}
	bits := map[Option]bool{}
	commands := map[Command]bool{}
	for _, o := range OptionTable {
		if longs[o.Long] {
			t.Errorf("--%s twice", o.Long)
		}
		longs[o.Long] = true
		for _, c := range o.Short {
			if shorts[c] {
				t.Errorf("-%c twice", c)
			}
			shorts[c] = true
		}
		if (o.Command == NoCommand) == (o.Option == NoOption) && o.Long != "sort" && o.Long != "ipv6" {
			t.Errorf("--%s: command %d, option %d", o.Long, o.Command, o.Option)
		}
		bits[o.Option] = true
		commands[o.Command] = true
		usage := Usage("ipvsadm")
		if o.Documented && !strings.Contains(usage, "--"+o.Long+" ") && !strings.Contains(usage, "--"+o.Long+"|") {
			t.Errorf("--%s is documented but not in -h", o.Long)
		}
		if o.Arg != ArgNone && o.ArgName == "" {
			t.Errorf("--%s has no argument name", o.Long)
		}
	}
	for o := Option(0); int(o) < numOptions; o++ {
		if !bits[o] {
			t.Errorf("no option sets bit %s", o.Name())
		}
	}
	for c := Command(0); c <= CmdVersion; c++ {
		if !commands[c] {
			t.Errorf("no option selects command %s", c.Name())
		}
	}
	if !strings.Contains(Usage("ipvsadm"), "--set tcp tcpfin udp ") {
		t.Error("usage lost --set")
	}
}

func TestOptionsFor(t *testing.T) {
	names := func(c Command) string {
		var s []string
		for _, o := range optionsFor(c) {
			s = append(s, o.Long)
		}
		return strings.Join(s, " ")
	}
	for c, want := range map[Command]string{
		CmdSave:         "numeric sort ipv6",
		CmdRestore:      "sort ipv6",
		CmdDeleteServer: "tcp-service udp-service sctp-service fwmark-service real-server sort ipv6",
		CmdStopDaemon:   "syncid sort ipv6",
		CmdHelp:         "",
	} {
		if got := names(c); got != want {
			t.Errorf("%s: got %q, want %q", c.Name(), got, want)
		}
	}
}
