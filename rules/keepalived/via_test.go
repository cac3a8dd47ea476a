package keepalived

import (
	"strings"
	"testing"
)

// TestCheckThroughVIP: where keepalived's checker connects (check_api.c
// queue_checker: the real server's address and port as written;
// co_ip_handler, co_port_handler: connect_ip and connect_port;
// co_fwmark_handler: SO_MARK on the probe's socket, set by layer4.c
// socket_bind_connect) converts to the check's via. Each case names the
// notice expected at a line, whether it is lossy (refused without
// --lossy), and the check --lossy writes.
func TestCheckThroughVIP(t *testing.T) {
	// vs is a virtual server 10.50.0.1:80 whose one real server,
	// 10.60.0.1 at rsPort, has TCP_CHECK { chk } (from line 5) and the
	// method kind; the file ends with the mark's own virtual server.
	vs := func(kind, rsPort, chk string) string {
		return "virtual_server 10.50.0.1 80 {\n  protocol TCP\n  lb_kind " + kind + "\n  real_server 10.60.0.1 " + rsPort + " {\n" +
			"    TCP_CHECK {\n" + chk + "    }\n    inhibit_on_failure\n  }\n}\n" +
			"virtual_server fwmark 11 {\n  lb_kind " + kind + "\n  real_server 10.60.0.1 " + rsPort + " { }\n}\n"
	}
	for _, c := range []struct {
		name   string
		conf   string
		line   int
		notice string
		lossy  bool
		via    string
		port   int
	}{{
		// The mark's virtual server sends the probe of the VIP to this
		// NAT real server; without connect_port keepalived probes the
		// real server's port (queue_checker copies its address and port,
		// co_ip_handler keeps the port), 8080 of the VIP, which the mark's
		// service takes to 10.60.0.1:8080, as lvsctl's own does.
		name: "NAT, the VIP and a mark", conf: vs("NAT", "8080", "      connect_ip 10.50.0.1\n      fwmark 11\n"),
		line: 6, notice: "connect_ip 10.50.0.1 with fwmark 11 (line 7): keepalived's probe goes through the director's table to this real server, steered by the mark; lvsctl checks via vip, with a mark service of its own per real server, so the check needs neither fwmark 11 nor what steers it (virtual_server fwmark 11 at keepalived.conf:12)",
		via: "vip",
	}, {
		// Direct routing: the probe reaches the real server at the VIP's
		// port, 80, as connect_port says. fwmark before connect_ip reads
		// the same (each handler sets its own field).
		name: "DR, mark first, connect_port the VIP's", conf: vs("DR", "80", "      fwmark 11\n      connect_port 80\n      connect_ip 10.50.0.1\n"),
		line: 8, notice: "with fwmark 11 (line 6)", via: "vip",
	}, {
		// An address keepalived reads up to its '/' (lib/utils.c
		// inet_stosockaddr), and a v4-mapped one, compared unmapped.
		name: "connect_ip with a prefix length", conf: vs("DR", "80", "      connect_ip 10.50.0.1/32\n      fwmark 11\n"),
		line: 6, notice: `connect_ip "10.50.0.1/32": keepalived reads the address 10.50.0.1`, via: "vip",
	}, {
		name: "connect_ip v4-mapped", conf: vs("DR", "80", "      connect_ip ::ffff:10.50.0.1\n      fwmark 11\n"),
		line: 6, notice: "connect_ip 10.50.0.1 with fwmark 11", via: "vip",
	}, {
		// keepalived probes port 8080 of the VIP, which a direct-routing
		// real server gets as it is; lvsctl's probe goes to port 80.
		name: "DR, another port of the VIP", conf: vs("DR", "80", "      connect_ip 10.50.0.1\n      connect_port 8080\n      fwmark 11\n"),
		line: 6, notice: "connect_ip 10.50.0.1, port 8080: keepalived probes that port of the virtual address; lvsctl's via vip probes the service's port and reaches real server 10.60.0.1 at port 80",
		lossy: true, via: "vip",
	}, {
		// No mark: IPVS schedules keepalived's probe of the VIP to any
		// real server of the service.
		name: "the VIP without a mark", conf: vs("NAT", "80", "      connect_ip 10.50.0.1\n"),
		line: 6, notice: "connect_ip 10.50.0.1 without fwmark: keepalived's probe of the virtual address goes to whichever real server IPVS schedules, and that one's answer stands for 10.60.0.1",
		lossy: true, via: "vip",
	}, {
		// co_fwmark_handler takes 0, which sets no mark.
		name: "fwmark 0", conf: vs("NAT", "80", "      connect_ip 10.50.0.1\n      fwmark 0\n"),
		line: 6, notice: "without fwmark", lossy: true, via: "vip",
	}, {
		name: "another address", conf: vs("DR", "80", "      connect_ip 10.70.0.1\n      fwmark 11\n"),
		line: 6, notice: "connect_ip 10.70.0.1: neither the real server's address nor one of the virtual server's: not expressible in an lvsctl check",
		lossy: true, via: "direct",
	}, {
		// The mark of a probe of the real server's own address matters
		// only to the director's own rules.
		name: "a mark without connect_ip", conf: vs("DR", "80", "      fwmark 11\n"),
		line: 6, notice: "fwmark 11: keepalived marks its probe of the real server's own address",
		lossy: true, via: "direct",
	}, {
		name: "a mark on the real server's own address", conf: vs("NAT", "80", "      connect_ip 10.60.0.1\n      fwmark 11\n"),
		line: 7, notice: "fwmark 11: keepalived marks its probe of the real server's own address", lossy: true,
	}, {
		name: "the real server's own address", conf: vs("DR", "80", "      connect_ip 10.60.0.1\n"),
		line: 6, notice: "connect_ip 10.60.0.1: the real server's own address, which lvsctl probes anyway", via: "direct",
	}, {
		// A virtual_server fwmark has no address to probe through.
		name: "a fwmark virtual server", conf: "virtual_server fwmark 11 {\n  lb_kind DR\n  real_server 10.60.0.1 0 {\n    TCP_CHECK {\n      connect_ip 10.50.0.1\n      connect_port 80\n      fwmark 12\n    }\n    inhibit_on_failure\n  }\n}\n",
		line: 5, notice: "not expressible in an lvsctl check", lossy: true, via: "direct", port: 80,
	}, {
		// Any address of a group's: each service is probed through its own.
		name: "a group's second address", conf: "virtual_server_group G {\n  10.50.0.1 80\n  10.50.0.2 80\n}\nvirtual_server group G {\n  protocol TCP\n  lb_kind DR\n  real_server 10.60.0.1 80 {\n    TCP_CHECK {\n      connect_ip 10.50.0.2\n      fwmark 11\n    }\n    inhibit_on_failure\n  }\n}\n",
		line: 10, notice: "(an IPVS fwmark service or a routing rule); each service of the group is probed through its own address and port", via: "vip",
	}, {
		// lvsctl run probes the real servers of a fwmark service directly.
		name: "a group with a fwmark entry", conf: "virtual_server_group G {\n  10.50.0.1 80\n  fwmark 7\n}\nvirtual_server group G {\n  protocol TCP\n  lb_kind DR\n  real_server 10.60.0.1 80 {\n    TCP_CHECK {\n      connect_ip 10.50.0.1\n      fwmark 11\n    }\n    inhibit_on_failure\n  }\n}\n",
		line: 10, notice: "connect_ip 10.50.0.1: lvsctl probes the real servers of virtual_server_group G's fwmark entries directly, not through 10.50.0.1",
		lossy: true, via: "vip",
	}} {
		t.Run(c.name, func(t *testing.T) {
			_, err := imp(t, c.conf, false)
			switch {
			case c.lossy && (err == nil || !strings.Contains(err.Error(), c.notice)):
				t.Errorf("without --lossy: err = %v; want a refusal %q", err, c.notice)
			case !c.lossy && err != nil:
				t.Fatalf("without --lossy: %v", err)
			}
			r := mustImport(t, c.conf, true)
			n := hasNotice(r, c.notice)
			if n == nil || n.Line != c.line || n.Lossy != c.lossy {
				t.Errorf("notice %q at line %d, lossy %v: got %+v\nall: %v", c.notice, c.line, c.lossy, n, r.Notices)
			}
			for _, s := range r.Document.Services {
				chk := s.Check
				if chk == nil && len(s.Destinations) > 0 {
					chk = s.Destinations[0].Check
				}
				if chk == nil {
					continue
				}
				if chk.Via != c.via || chk.Port != c.port {
					t.Errorf("service %s%d: check via %q, port %d; want via %q, port %d", s.Address, s.FWMark, chk.Via, chk.Port, c.via, c.port)
				}
				if err := chk.Validate(); err != nil {
					t.Errorf("check %+v: %v", chk, err)
				}
			}
			planAccepts(t, c.name, r)
		})
	}
}
