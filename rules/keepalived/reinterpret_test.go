package keepalived

import (
	"strings"
	"testing"

	"github.com/lvskit/lvskit/rules/desired"
)

// svc is the one service of a conversion.
func svc(t *testing.T, r *Result) desired.JSONService {
	t.Helper()
	if len(r.Document.Services) != 1 {
		t.Fatalf("%d services, want 1", len(r.Document.Services))
	}
	return r.Document.Services[0]
}

// TestReinterpretations: each place where keepalived 2.2.7 reads the
// author's words otherwise than they say converts as keepalived reads
// them, with a notice at the line naming what keepalived does. Each case
// names the keepalived 2.2.7 source it follows.
func TestReinterpretations(t *testing.T) {
	const rs = "  real_server 10.0.0.1 80 {\n    TCP_CHECK { connect_port 80 }\n    inhibit_on_failure\n  }\n"
	vs := func(body string) string {
		return "virtual_server 192.0.2.1 80 {\n  protocol TCP\n" + body + rs + "}\n"
	}
	for _, c := range []struct {
		name   string
		conf   string
		line   int
		notice string
		check  func(t *testing.T, s desired.JSONService)
	}{{
		// lib/parser.c process_stream hands the whole line to the handler;
		// check_parser.c vs_handler passes alloc_vs two words.
		name: "extra words after virtual_server", conf: "virtual_server 192.0.2.1 80 dev eth0.53 {\n  protocol TCP\n" + rs + "}\n",
		line: 1, notice: "keepalived reads 2 values and ignores the rest (dev eth0.53)",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Address != "192.0.2.1" || *s.Port != 80 {
				t.Errorf("%+v", s)
			}
		},
	}, {
		// check_parser.c pto_handler: read_unsigned_strvec(1, LVS_MAX_TIMEOUT)
		// refuses 0, and the keyword is ignored.
		name: "persistence_timeout 0", conf: vs("  persistence_timeout 0\n"), line: 3, notice: "the service is not persistent",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Persistence != nil {
				t.Errorf("persistence %+v, want none", s.Persistence)
			}
		},
	}, {
		// check_parser.c rs_weight_handler: read_unsigned_strvec with
		// ignore_error takes the leading digits.
		name: "real server weight with trailing text", line: 4, notice: `weight "5x": keepalived reads 5`,
		conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    weight 5x\n    TCP_CHECK { connect_port 80 }\n  }\n}\n",
		check: func(t *testing.T, s desired.JSONService) {
			if w := s.Destinations[0].Weight; w != 5 {
				t.Errorf("weight %d, want 5", w)
			}
		},
	}, {
		// check_parser.c uthreshold_handler: read_unsigned_strvec with
		// ignore_error takes the leading digits.
		name: "uthreshold with trailing text", line: 4, notice: `uthreshold "100x": keepalived reads 100`,
		conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    uthreshold 100x\n    TCP_CHECK { connect_port 80 }\n  }\n}\n",
		check: func(t *testing.T, s desired.JSONService) {
			if u := s.Destinations[0].UpperThreshold; u != 100 {
				t.Errorf("upper threshold %d, want 100", u)
			}
		},
	}, {
		// check_api.c co_port_handler: 1 to 65535, else ignored.
		name: "connect_port 0", line: 4, notice: `connect_port "0": keepalived ignores it`,
		conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    TCP_CHECK { connect_port 0 }\n  }\n}\n",
		check: func(t *testing.T, s desired.JSONService) {
			c := s.Check
			if d := s.Destinations[0].Check; d != nil {
				c = d
			}
			if c == nil || c.Type != "tcp" || c.Port != 0 {
				t.Errorf("check %+v, want a tcp check of the real server's own port", c)
			}
		},
	}, {
		// check_parser.c svr_forwarding_handler compares with strcmp.
		name: "lb_kind in lower case", conf: vs("  lb_kind dr\n"), line: 3, notice: "keepalived reads only upper case",
		check: func(t *testing.T, s desired.JSONService) {
			if m := s.Destinations[0].Method; m != "masq" {
				t.Errorf("method %s, want masq (NAT)", m)
			}
		},
	}, {
		// check_parser.c lbalgo_handler: strcmp against lvs_schedulers.
		name: "unknown scheduler", conf: vs("  lb_algo loadbalance\n"), line: 3, notice: "not a scheduler keepalived knows",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Scheduler != "wlc" {
				t.Errorf("scheduler %s, want wlc", s.Scheduler)
			}
		},
	}, {
		name: "scheduler in upper case", conf: vs("  lb_algo RR\n"), line: 3, notice: "not a scheduler keepalived knows",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Scheduler != "wlc" {
				t.Errorf("scheduler %s, want wlc", s.Scheduler)
			}
		},
	}, {
		// check_parser.c lbflags_handler: sh-port is set only while the
		// scheduler is sh; under mh it is dropped.
		name: "sh-port under mh", conf: vs("  lvs_sched mh\n  sh-port\n"), line: 4, notice: "not a flag of the mh scheduler",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Scheduler != "mh" || len(s.SchedulerFlags) != 0 {
				t.Errorf("%s %q, want mh and no flag", s.Scheduler, s.SchedulerFlags)
			}
		},
	}, {
		// lbflags_handler reads vs->sched when the flag comes: before
		// lb_algo it is unset.
		name: "flag before its scheduler", conf: vs("  sh-port\n  lb_algo sh\n"), line: 3, notice: "keepalived takes it only after lb_algo sh",
		check: func(t *testing.T, s desired.JSONService) {
			if len(s.SchedulerFlags) != 0 {
				t.Errorf("flags %q, want none", s.SchedulerFlags)
			}
		},
	}, {
		// lbflags_handler: "hashed" matches none of its branches.
		name: "hashed", conf: vs("  lb_algo sh\n  hashed\n"), line: 4, notice: "hashed: keepalived sets no flag for it",
		check: func(t *testing.T, s desired.JSONService) {
			if len(s.SchedulerFlags) != 0 {
				t.Errorf("flags %q, want none", s.SchedulerFlags)
			}
		},
	}, {
		// check_parser.c pgr_handler: an IPv4 service reads the mask with
		// getaddrinfo (inet_aton), so "24" is 0.0.0.24.
		name: "granularity as a prefix length on IPv4", conf: vs("  persistence_granularity 24\n"), line: 3, notice: "keepalived reads it as the mask 0.0.0.24",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Persistence == nil || s.Persistence.Netmask != "0.0.0.24" || s.Persistence.Timeout != 360 {
				t.Errorf("persistence %+v, want 360 s, 0.0.0.24", s.Persistence)
			}
		},
	}, {
		// keepalived/check/ipvswrapper.c ipvs_group_range_cmd sets the full
		// netmask for each service of a virtual_server group.
		name: "granularity on a group", conf: "virtual_server_group G {\n  192.0.2.1 80\n}\nvirtual_server group G {\n  protocol TCP\n  persistence_timeout 33\n  persistence_granularity 255.255.0.0\n" + rs + "}\n",
		line: 7, notice: "keepalived applies no mask to the services of a virtual_server group",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Persistence == nil || s.Persistence.Netmask != "255.255.255.255" || s.Persistence.Timeout != 33 {
				t.Errorf("persistence %+v, want 33 s, 255.255.255.255", s.Persistence)
			}
		},
	}, {
		// check_parser.c proto_handler: strcasecmp; another is ignored
		// and validate_check_config defaults to UDP.
		name: "unknown protocol", conf: "virtual_server 192.0.2.1 80 {\n  protocol ICMP\n" + rs + "}\n", line: 2, notice: "keepalived knows TCP, UDP and SCTP",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Protocol != "udp" {
				t.Errorf("protocol %s, want udp", s.Protocol)
			}
		},
	}, {
		// lib/parser.c read_unsigned_func with ignore_error: the leading
		// digits of "x" are none, 0, which is in range: weight 0.
		name: "weight x", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    weight x\n  }\n}\n", line: 4, notice: "keepalived reads 0",
		check: func(t *testing.T, s desired.JSONService) {
			if w := s.Destinations[0].Weight; w != 0 {
				t.Errorf("weight %d, want 0", w)
			}
		},
	}, {
		// check_http.c installs nb_get_retry for HTTP_GET and SSL_GET
		// only: in TCP_CHECK it is an unknown keyword.
		name: "nb_get_retry in TCP_CHECK", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    inhibit_on_failure\n    TCP_CHECK {\n      nb_get_retry 3\n    }\n  }\n}\n",
		line: 6, notice: "unknown keyword in TCP_CHECK",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Check == nil || s.Check.Fall != 2 {
				t.Errorf("check %+v, want fall 2 (the default retry of 1)", s.Check)
			}
		},
	}, {
		// check_parser.c vs_retry_handler: at least 1; 0 is ignored.
		name: "retry 0 on a virtual server", conf: vs("  retry 0\n"), line: 3, notice: "keepalived takes a count from 1",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Check == nil || s.Check.Fall != 2 {
				t.Errorf("check %+v, want fall 2", s.Check)
			}
		},
	}, {
		// lib/parser.c read_timer: "6s" becomes "6s000000", whose leading
		// digits are 6 µs.
		name: "delay_loop with a unit", conf: vs("  delay_loop 6s\n"), line: 3, notice: "keepalived reads 0.000006s",
	}, {
		// check_parser.c vs_inhibit_handler reads no value.
		name: "inhibit_on_failure off on a virtual server", conf: vs("  inhibit_on_failure off\n"), line: 3, notice: "reads no value and turns it on",
	}, {
		// lib/parser.c process_stream: an unknown keyword's '{' is
		// "unexpected" and its '}' closes the enclosing block, so the
		// real server after it is read at the top level.
		name: "unknown block closes its parent", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    TCP_CHEK {\n      connect_port 80\n    }\n  }\n  real_server 10.0.0.2 80 {\n  }\n}\n",
		line: 4, notice: "its '}' closes real_server",
		check: func(t *testing.T, s desired.JSONService) {
			if len(s.Destinations) != 1 || s.Destinations[0].Check != nil {
				t.Errorf("destinations %+v: want 10.0.0.1 alone, unchecked", s.Destinations)
			}
		},
	}, {
		// check_parser.c rs_end_handler: a real server of the other family
		// is skipped unless tunnelled.
		name: "real server of the other family", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 2001:db8::1 80 {\n  }\n  real_server 10.0.0.1 80 {\n  }\n}\n",
		line: 3, notice: "not of the virtual server's family inet: keepalived skips it",
		check: func(t *testing.T, s desired.JSONService) {
			if len(s.Destinations) != 1 {
				t.Errorf("destinations %+v", s.Destinations)
			}
		},
	}, {
		// check_data.c validate_check_config: a duplicate real server is
		// removed.
		name: "duplicate real server", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    weight 2\n  }\n  real_server 10.0.0.1 80 {\n    weight 3\n  }\n}\n",
		line: 6, notice: "a duplicate: keepalived drops the second",
		check: func(t *testing.T, s desired.JSONService) {
			if len(s.Destinations) != 1 || s.Destinations[0].Weight != 2 {
				t.Errorf("destinations %+v", s.Destinations)
			}
		},
	}, {
		// check_data.c alloc_rs copies the virtual server's method as read
		// so far: lb_kind after a real server does not reach it, unless
		// none was set before.
		name: "lb_kind between real servers", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  lb_kind NAT\n  real_server 10.0.0.1 80 {\n  }\n  lb_kind DR\n  real_server 10.0.0.2 80 {\n  }\n}\n",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Destinations[0].Method != "masq" || s.Destinations[1].Method != "route" {
				t.Errorf("methods %s, %s; want masq, route", s.Destinations[0].Method, s.Destinations[1].Method)
			}
		},
	}, {
		// check_http.c http_get_check_end: no url, no checker.
		name: "HTTP_GET without url", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    HTTP_GET {\n      connect_timeout 3\n    }\n  }\n}\n",
		line: 4, notice: "keepalived drops this checker",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Check != nil || s.Destinations[0].Check != nil {
				t.Errorf("a check: %+v", s)
			}
		},
	}, {
		// check_http.c status_code_handler skips a code outside 100-599.
		name: "bad status code", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    inhibit_on_failure\n    HTTP_GET {\n      url {\n        path /\n        status_code 200 2000\n      }\n    }\n  }\n}\n",
		line: 8, notice: "status_code \"2000\"",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Check == nil || s.Check.Expect != "200" {
				t.Errorf("check %+v, want expect 200", s.Check)
			}
		},
	}, {
		// lib/parser.c process_stream: a keyword with a block but no '{'
		// reads the following lines as its block.
		name: "missing brace", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80\n    weight 4\n  }\n}\n",
		line: 4, notice: "no '{' after real_server",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Destinations[0].Weight != 4 {
				t.Errorf("weight %d, want 4", s.Destinations[0].Weight)
			}
		},
	}, {
		// lib/parser.c process_stream: a '}' at the top level is an unknown
		// keyword; read_line counts it as an extra '}'.
		name: "extra brace", conf: vs("") + "}\n", line: 8, notice: "extra '}': keepalived ignores it",
	}, {
		// lib/parser.c: a block still open at the end is read to the end.
		name: "brace never closed", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 {\n    weight 2\n",
		line: 1, notice: "virtual_server: its '{' is never closed",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Destinations[0].Weight != 2 {
				t.Errorf("weight %d, want 2", s.Destinations[0].Weight)
			}
		},
	}, {
		// lib/parser.c alloc_strvec_r: an unmatched quote ends the words.
		name: "quote without its end", conf: vs("  virtualhost \"www.example.org\n"), line: 3, notice: "a quote without its end",
	}, {
		// "//" is no comment: the words are read as a keyword.
		name: "slashes as a comment", conf: "virtual_server 192.0.2.1 80 {\n  protocol TCP\n  real_server 10.0.0.1 80 { //web\n    weight 2 //more\n  }\n}\n",
		line: 3, notice: "//web: unknown keyword in real_server",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Destinations[0].Weight != 2 {
				t.Errorf("weight %d, want 2", s.Destinations[0].Weight)
			}
		},
	}, {
		// lib/parser.c: keywords are case-sensitive.
		name: "keyword in the wrong case", conf: vs("  Protocol UDP\n"), line: 3, notice: "keywords are case-sensitive: protocol",
		check: func(t *testing.T, s desired.JSONService) {
			if s.Protocol != "tcp" {
				t.Errorf("protocol %s, want tcp", s.Protocol)
			}
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			r := mustImport(t, c.conf, false)
			if c.notice != "" {
				n := hasNotice(r, c.notice)
				if n == nil || n.Line != c.line || n.Lossy || n.Refused {
					t.Errorf("notice %q at line %d: got %+v\nall: %v", c.notice, c.line, n, r.Notices)
				}
			}
			if c.check != nil {
				c.check(t, svc(t, r))
			}
		})
	}
}

// TestEveryRefusalReported: all refusals of a file come back in one
// import, in line order, with the notices between them.
func TestEveryRefusalReported(t *testing.T) {
	conf := `virtual_server 192.0.2.1 80 {
  protocol TCP
  real_server 10.0.0.1 80 {
    HTTP_GET {
      url { path /x
            regex "ok" }
    }
  }
  real_server 10.0.0.2 80 {
    FILE_CHECK { }
  }
}
`
	r, err := imp(t, conf, false)
	es, ok := err.(Errors)
	if !ok || len(es) != 2 || es[0].Line != 6 || es[1].Line != 10 {
		t.Fatalf("err = %v; want two refusals, lines 6 and 10", err)
	}
	last := 0
	for _, n := range r.Notices {
		if n.Line < last {
			t.Errorf("notices out of line order: %v", r.Notices)
		}
		last = n.Line
	}
}

// TestNoVirtualServer: a file without a virtual server that has real
// servers is an error, not an empty document run would refuse.
func TestNoVirtualServer(t *testing.T) {
	for _, conf := range []string{"", "vrrp_instance V {\n}\n", "virtual_server 192.0.2.1 80 {\n}\n"} {
		_, err := imp(t, conf, false)
		if err == nil || !strings.Contains(err.Error(), "no virtual server with real servers") {
			t.Errorf("%q: err = %v", conf, err)
		}
	}
}

// TestSameBytes: importing the same file twice writes the same YAML.
func TestSameBytes(t *testing.T) {
	dir := files(t, map[string]string{"keepalived.conf": basic})
	r1, err1 := Import(dir+"/keepalived.conf", Options{})
	r2, err2 := Import(dir+"/keepalived.conf", Options{})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	var a, b strings.Builder
	if err := WriteYAML(&a, r1); err != nil {
		t.Fatal(err)
	}
	if err := WriteYAML(&b, r2); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() || !strings.Contains(a.String(), "\n  - protocol: tcp\n") || strings.Contains(a.String(), `"protocol"`) {
		t.Errorf("not the same block YAML:\n%s\n%s", a.String(), b.String())
	}
}
