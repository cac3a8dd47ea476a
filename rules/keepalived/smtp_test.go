package keepalived

import (
	"strings"
	"testing"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/rules/desired"
)

// TestPingSMTPAndAbsentCheckers: PING_CHECK and SMTP_CHECK convert as
// keepalived 2.2.7 reads them, SMTP_CHECK's host blocks included, each
// reading with a notice at its line naming what keepalived does; what
// lvsctl cannot do is lossy (refused without --lossy). FILE_CHECK and
// BFD_CHECK stay refused, saying why. Each case names the keepalived
// source it follows.
func TestPingSMTPAndAbsentCheckers(t *testing.T) {
	// rs is a real server 10.0.0.1 with body, in a TCP service on port 25
	// of the method given (the check's timing: 2 s, 1 s, retry 1).
	rs := func(method, body string) string {
		return "virtual_server 192.0.2.1 25 {\n  protocol TCP\n  lb_kind " + method + "\n  delay_loop 2\n  connect_timeout 1\n" +
			"  real_server 10.0.0.1 25 {\n    inhibit_on_failure\n" + body + "  }\n}\n"
	}
	// check returns the real server's one check.
	check := func(t *testing.T, s desired.JSONService) health.Spec {
		t.Helper()
		c := s.Check
		if c == nil {
			c = s.Destinations[0].Check
		}
		if c == nil {
			t.Fatalf("no check: %+v", s)
		}
		return *c
	}
	for _, c := range []struct {
		name   string
		conf   string
		line   int
		notice string // "" for none
		lossy  bool
		check  func(t *testing.T, s health.Spec)
	}{{
		// check_ping.c: the common keywords; an echo to the real server's
		// own address; retry 1 by default (check_api.c queue_checker).
		name: "PING_CHECK", conf: rs("DR", "    PING_CHECK { }\n"),
		check: func(t *testing.T, s health.Spec) {
			if s.Type != "ping" || s.Via != "" || s.Port != 0 || s.Fall != 2 || s.Rise != 1 || s.Interval != "2s" || s.Timeout != "1s" {
				t.Errorf("check %+v, want ping, no via (direct for pings), no port, fall 2, rise 1, 2s, 1s", s)
			}
		},
	}, {
		// check_ping.c ping_it sends to co->dst: the port is not used.
		name: "PING_CHECK connect_port", conf: rs("NAT", "    PING_CHECK {\n      connect_port 80\n      retry 3\n    }\n"),
		line: 9, notice: "connect_port: a PING_CHECK sends ICMP echo, which has no port",
		check: func(t *testing.T, s health.Spec) {
			if s.Type != "ping" || s.Port != 0 || s.Fall != 4 {
				t.Errorf("check %+v, want ping, no port, fall 4", s)
			}
		},
	}, {
		// check_ping.c icmp_connect_thread binds and marks nothing.
		name: "PING_CHECK bindto", conf: rs("NAT", "    PING_CHECK {\n      bindto 10.0.0.9\n    }\n"),
		line: 9, notice: "bindto: keepalived's PING_CHECK neither binds nor marks its ICMP socket",
	}, {
		// A ping needs no port: a real server without one is no loss.
		name: "PING_CHECK of a real server without a port", conf: strings.Replace(rs("NAT", "    PING_CHECK { }\n"), "real_server 10.0.0.1 25", "real_server 10.0.0.1", 1),
		check: func(t *testing.T, s health.Spec) {
			if s.Type != "ping" {
				t.Errorf("check %+v, want ping", s)
			}
		},
	}, {
		// check_smtp.c smtp_check_end_handler: without connect_port the
		// real server's port; the helo is SMTP_DEFAULT_HELO; the timeout
		// the virtual server's; DR probes the real server's own address.
		name: "SMTP_CHECK", conf: rs("DR", "    SMTP_CHECK { }\n"), line: 8, notice: "SMTP_CHECK: keepalived gives each step of the conversation connect_timeout",
		check: func(t *testing.T, s health.Spec) {
			if s.Type != "smtp" || s.Port != 0 || s.Helo != "" || s.Via != "direct" || s.Fall != 2 || s.Timeout != "1s" {
				t.Errorf("check %+v, want smtp, the server's port, the default helo, via direct, fall 2, 1s", s)
			}
		},
	}, {
		// check_smtp.c smtp_helo_name_handler, co_port_handler.
		name: "helo_name and connect_port", conf: rs("NAT", "    SMTP_CHECK {\n      helo_name \"lb1.example.com\"\n      connect_port 587\n    }\n"),
		check: func(t *testing.T, s health.Spec) {
			if s.Helo != "lb1.example.com" || s.Port != 587 {
				t.Errorf("check %+v, want helo lb1.example.com, port 587", s)
			}
		},
	}, {
		// smtp_helo_name_handler: without a name, ignored.
		name: "helo_name without a name", conf: rs("NAT", "    SMTP_CHECK {\n      helo_name\n    }\n"), line: 9, notice: "helo_name without a name: keepalived ignores it",
		check: func(t *testing.T, s health.Spec) {
			if s.Helo != "" {
				t.Errorf("helo %q, want the default", s.Helo)
			}
		},
	}, {
		// smtp_check_end_handler fixes the checker's timeout where its
		// block ends: a connect_timeout after it does not count.
		name: "timeout fixed at the block's end", conf: rs("NAT", "    SMTP_CHECK { }\n    connect_timeout 3\n"),
		line: 8, notice: "keepalived fixes its timeout where the block ends (check_smtp.c smtp_check_end_handler), from the connect_timeout read before it: 1s, not the 3s given after it",
		check: func(t *testing.T, s health.Spec) {
			if s.Timeout != "1s" {
				t.Errorf("timeout %s, want 1s", s.Timeout)
			}
		},
	}, {
		name: "real server's timeout before the check", conf: rs("NAT", "    connect_timeout 3\n    SMTP_CHECK { }\n"),
		check: func(t *testing.T, s health.Spec) {
			if s.Timeout != "3s" || s.Interval != "5s" {
				t.Errorf("timing %s/%s, want the real server's 3s (and 5s: not below delay_loop)", s.Timeout, s.Interval)
			}
		},
	}, {
		// smtp_check_end_handler: no connection keyword of the checker's
		// own, so the first host's connection is the checker's.
		name: "one host with its timeout", conf: rs("NAT", "    SMTP_CHECK {\n      host {\n        connect_ip 10.0.0.1\n        connect_port 2525\n        connect_timeout 0.5\n        retry 2\n      }\n    }\n"),
		line: 10, notice: "connect_ip 10.0.0.1: the real server's own address",
		check: func(t *testing.T, s health.Spec) {
			if s.Port != 2525 || s.Timeout != "0.5s" || s.Fall != 3 {
				t.Errorf("check %+v, want the host's port 2525 and timeout 0.5s, and fall 3 (retry in a host is the checker's)", s)
			}
		},
	}, {
		// smtp_host_handler allocates the host's connection zeroed; only a
		// timeout of UINT_MAX gets a default: 0.
		name: "one host without a timeout", conf: rs("NAT", "    SMTP_CHECK {\n      host {\n        connect_port 25\n      }\n    }\n"),
		line: 9, notice: "host without connect_timeout: keepalived 2.2.7 gives its connection a timeout of 0", lossy: true,
		check: func(t *testing.T, s health.Spec) {
			if s.Timeout != "1s" {
				t.Errorf("timeout %s, want the virtual server's 1s", s.Timeout)
			}
		},
	}, {
		// A host at another address becomes the checker's connection.
		name: "one host elsewhere", conf: rs("NAT", "    SMTP_CHECK {\n      host {\n        connect_ip 10.0.0.9\n        connect_timeout 1\n      }\n    }\n"),
		line: 10, notice: "connect_ip 10.0.0.9: neither the real server's address nor one of the virtual server's: not expressible", lossy: true,
	}, {
		// The first host's connect_ip and fwmark are the checker's: the
		// virtual address with a mark is a check through the VIP
		// (probeWay), as for any checker.
		name: "one host through the VIP", conf: rs("NAT", "    SMTP_CHECK {\n      host {\n        connect_ip 192.0.2.1\n        fwmark 7\n        connect_timeout 1\n      }\n    }\n"),
		line: 10, notice: "connect_ip 192.0.2.1 with fwmark 7 (line 11): keepalived's probe goes through the director's table to this real server",
		check: func(t *testing.T, s health.Spec) {
			if s.Via != "vip" || s.Port != 0 {
				t.Errorf("check %+v, want via vip, no port", s)
			}
		},
	}, {
		// check_ping.c ping_it sends to connect_ip: lvsctl pings the real
		// server's own address only.
		name: "PING_CHECK connect_ip elsewhere", conf: rs("NAT", "    PING_CHECK {\n      connect_ip 192.0.2.1\n    }\n"),
		line: 9, notice: "connect_ip 192.0.2.1: keepalived's PING_CHECK pings that address for real server 10.0.0.1; lvsctl pings the real server's own address", lossy: true,
	}, {
		name: "PING_CHECK connect_ip of the real server", conf: rs("DR", "    PING_CHECK {\n      connect_ip 10.0.0.1\n      fwmark 7\n    }\n"),
		line: 10, notice: "fwmark: keepalived's PING_CHECK neither binds nor marks its ICMP socket",
		check: func(t *testing.T, s health.Spec) {
			if s.Type != "ping" || s.Via != "" {
				t.Errorf("check %+v, want a ping of the real server", s)
			}
		},
	}, {
		// A connection keyword of the checker's own keeps its connection;
		// each host is then a checker of its own, ANDed with it. One of
		// the same address and port stands for nothing more.
		name: "the checker and a host of the same", conf: rs("NAT", "    SMTP_CHECK {\n      connect_timeout 2\n      host {\n        connect_ip 10.0.0.1\n        connect_timeout 2\n      }\n    }\n"),
		line: 10, notice: "host 10.0.0.1:25: what the check probes: keepalived runs a second checker of it",
		check: func(t *testing.T, s health.Spec) {
			if s.Timeout != "2s" || s.Port != 0 {
				t.Errorf("check %+v, want the checker's own: 2s, the server's port", s)
			}
		},
	}, {
		name: "the checker and a host elsewhere", conf: rs("NAT", "    SMTP_CHECK {\n      connect_port 25\n      host {\n        connect_ip 10.0.0.9\n        connect_timeout 2\n      }\n    }\n"),
		line: 10, notice: "host 10.0.0.9:25: keepalived checks it too, with a checker of its own, and serves real server 10.0.0.1 only while every checker passes", lossy: true,
	}, {
		name: "the checker and a host on another port", conf: rs("NAT", "    SMTP_CHECK {\n      bind_if eth0\n      host {\n        connect_port 587\n        connect_timeout 2\n      }\n    }\n"),
		line: 10, notice: "host 10.0.0.1:587: keepalived checks it too", lossy: true,
	}, {
		name: "the checker and a host without a timeout", conf: rs("NAT", "    SMTP_CHECK {\n      connect_timeout 2\n      host {\n      }\n    }\n"),
		line: 10, notice: "host without connect_timeout: keepalived 2.2.7 gives its connection a timeout of 0", lossy: true,
	}, {
		// Two hosts and nothing of the checker's own: the first is the
		// checker's connection, the second a checker of its own.
		name: "two hosts", conf: rs("NAT", "    SMTP_CHECK {\n      host {\n        connect_timeout 1\n      }\n      host {\n        connect_ip 10.0.0.9\n        connect_timeout 1\n      }\n    }\n"),
		line: 12, notice: "host 10.0.0.9:25: keepalived checks it too", lossy: true,
	}, {
		// check_api.c co_srcip_handler in a host: the host's own source.
		name: "bindto in a host", conf: rs("NAT", "    SMTP_CHECK {\n      host {\n        bindto 10.0.0.200\n        connect_timeout 1\n      }\n    }\n"),
		line: 10, notice: "bindto: not expressible in an lvsctl check", lossy: true,
	}, {
		// A value keepalived refuses sets nothing: the host stays the
		// checker's connection.
		name: "a refused connect_port of the checker's own", conf: rs("NAT", "    SMTP_CHECK {\n      connect_port 0\n      host {\n        connect_port 2525\n        connect_timeout 1\n      }\n    }\n"),
		line: 9, notice: `connect_port "0": keepalived ignores it`,
		check: func(t *testing.T, s health.Spec) {
			if s.Port != 2525 {
				t.Errorf("port %d, want the host's 2525", s.Port)
			}
		},
	}, {
		// check_file.c: the weight follows a tracked file.
		name: "FILE_CHECK", conf: rs("NAT", "    FILE_CHECK {\n      track_file f\n    }\n"),
		line: 8, notice: "FILE_CHECK: keepalived watches the file of a track_file block and adds the number in it (times weight) to the real server's weight, or takes the server out while it reads a fault; lvsctl has no file check: an exec check that reads the file does it (dynamic: true sets the weight from its exit status); real server 10.0.0.1 served unchecked",
		lossy: true,
	}, {
		// check_bfd.c: the state of a BFD session.
		name: "BFD_CHECK", conf: rs("NAT", "    BFD_CHECK {\n      name b1\n    }\n"),
		line: 8, notice: "BFD_CHECK: keepalived takes the real server out while the session of the bfd_instance it names, run by keepalived's BFD process, is down; lvsctl runs no BFD sessions; real server 10.0.0.1 served unchecked",
		lossy: true,
	}} {
		t.Run(c.name, func(t *testing.T) {
			if c.lossy {
				_, err := imp(t, c.conf, false)
				if err == nil || !strings.Contains(err.Error(), c.notice) || !strings.Contains(err.Error(), "--lossy converts it anyway") {
					t.Errorf("without --lossy: err = %v, want a refusal %q", err, c.notice)
				}
			}
			r := mustImport(t, c.conf, c.lossy)
			if c.notice != "" {
				n := hasNotice(r, c.notice)
				if n == nil || n.Line != c.line || n.Lossy != c.lossy || n.Refused {
					t.Errorf("notice %q at line %d (lossy %v): got %+v\nall: %v", c.notice, c.line, c.lossy, n, r.Notices)
				}
			} else {
				for _, n := range r.Notices {
					if n.Lossy || n.Refused {
						t.Errorf("a change: %v", n)
					}
				}
			}
			if c.check != nil {
				c.check(t, check(t, svc(t, r)))
			}
		})
	}
}
