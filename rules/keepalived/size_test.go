package keepalived

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The size of a large keepalived director: 2,284 virtual servers with
// 37,298 real servers, each checked.
const (
	bigServices = 2284
	bigReals    = 37298
)

// bigConfig writes that configuration: 754 services of 17 real servers and
// 1,530 of 16, each real server with a TCP_CHECK.
func bigConfig() string {
	var b strings.Builder
	b.WriteString("global_defs {\n    router_id big\n}\n")
	per17 := bigReals - bigServices*16
	for i := range bigServices {
		fmt.Fprintf(&b, "virtual_server 10.%d.%d.1 80 {\n    delay_loop 5\n    lb_algo wrr\n    lb_kind DR\n    protocol TCP\n", 100+i/250, i%250)
		n := 16
		if i < per17 {
			n = 17
		}
		for j := range n {
			fmt.Fprintf(&b, "    real_server 172.%d.%d.%d 80 {\n        weight %d\n        inhibit_on_failure\n        TCP_CHECK {\n            connect_timeout 2\n            retry 2\n        }\n    }\n",
				16+i/250, i%250, 10+j, 1+j%4)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// TestImportSize imports the large configuration and checks it whole: every
// service and real server, and the YAML reads back. The time it takes is
// logged, not asserted (docs/migrate-keepalived.md has the figure).
func TestImportSize(t *testing.T) {
	conf := bigConfig()
	dir := files(t, map[string]string{"keepalived.conf": conf})
	start := time.Now()
	r, err := Import(filepath.Join(dir, "keepalived.conf"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var yaml strings.Builder
	if err := WriteYAML(&yaml, r); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	reals := 0
	for _, s := range r.Document.Services {
		reals += len(s.Destinations)
		if s.Check == nil || s.Check.Type != "tcp" || s.Check.Fall != 3 || s.Check.Via != "direct" {
			t.Fatalf("%s: check %+v", s.Address, s.Check)
		}
	}
	if len(r.Document.Services) != bigServices || reals != bigReals {
		t.Fatalf("%d services, %d real servers; want %d and %d", len(r.Document.Services), reals, bigServices, bigReals)
	}
	t.Logf("%d services, %d real servers (%d lines, %d bytes): imported and written as YAML (%d bytes) in %v",
		bigServices, bigReals, strings.Count(conf, "\n"), len(conf), yaml.Len(), took.Round(time.Millisecond))
}

func BenchmarkImportSize(b *testing.B) {
	conf := []byte(bigConfig())
	for b.Loop() {
		if _, err := importData("keepalived.conf", conf, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkImportWriteSize(b *testing.B) {
	conf := []byte(bigConfig())
	for b.Loop() {
		r, err := importData("keepalived.conf", conf, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteYAML(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}
