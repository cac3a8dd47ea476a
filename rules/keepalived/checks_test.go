package keepalived

import (
	"testing"

	"github.com/lvskit/lvskit/rules/desired"
)

// checkTypes are the types of a service's or real server's checks.
func checkTypes(one *desired.JSONDestination, svc *desired.JSONService) []string {
	var out []string
	switch {
	case one != nil && one.Check != nil:
		return []string{one.Check.Type}
	case one != nil && one.Checks != nil:
		for _, c := range one.Checks {
			out = append(out, c.Type)
		}
	case svc.Check != nil:
		return []string{svc.Check.Type}
	default:
		for _, c := range svc.Checks {
			out = append(out, c.Type)
		}
	}
	return out
}

// TestSeveralCheckers: the checkers of a real server become its checks,
// in keepalived's order, all of which must pass, as keepalived serves a
// real server while every checker passes: nothing is lost. Real servers
// that share them give them to their service.
func TestSeveralCheckers(t *testing.T) {
	r := mustImport(t, `virtual_server 192.0.2.1 80 {
  protocol TCP
  delay_loop 2
  real_server 10.0.0.1 80 {
    HTTP_GET { url { path /health } }
    MISC_CHECK {
      misc_path "/bin/true"
      misc_dynamic
    }
  }
  real_server 10.0.0.2 80 {
    TCP_CHECK { }
  }
}
virtual_server 192.0.2.2 443 {
  protocol TCP
  real_server 10.0.0.3 443 {
    TCP_CHECK { }
    SSL_GET { url { path / } }
  }
  real_server 10.0.0.4 443 {
    TCP_CHECK { }
    SSL_GET { url { path / } }
  }
}
`, false)
	for _, n := range r.Notices {
		if n.Lossy {
			t.Errorf("lossy notice %q", n.Msg)
		}
	}
	svcs := r.Document.Services
	if len(svcs) != 2 {
		t.Fatalf("%d services", len(svcs))
	}
	for _, tc := range []struct {
		svc, dest int
		want      string
	}{{0, 0, "http exec"}, {0, 1, "tcp"}, {1, 0, "tcp https"}, {1, 1, "tcp https"}} {
		s := &svcs[tc.svc]
		if got := checkTypes(&s.Destinations[tc.dest], s); join(got) != tc.want {
			t.Errorf("service %d real server %d: checks %v, want %s", tc.svc, tc.dest, got, tc.want)
		}
	}
	if svcs[1].Checks == nil || svcs[1].Destinations[0].Checks != nil {
		t.Errorf("the checks both real servers share are not their service's: %+v", svcs[1])
	}
	if !svcs[0].Destinations[0].Checks[1].Dynamic {
		t.Errorf("misc_dynamic lost: %+v", svcs[0].Destinations[0].Checks[1])
	}
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out
}

// TestPublicTwoCheckers: the public configuration whose real server has a
// TCP_CHECK and an SSL_GET imports without --lossy, with both.
func TestPublicTwoCheckers(t *testing.T) {
	r, err := Import("testdata/public/mruse-keepalived-lvs.conf", Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &r.Document.Services[0]
	if got := checkTypes(&s.Destinations[0], s); join(got) != "tcp https" {
		t.Errorf("checks %v, want tcp https", got)
	}
}
