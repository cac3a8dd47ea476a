package ipvsadm

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
)

// BenchmarkRestoreUserPart is the restore's own work on the benchmark's
// 1,000×10 input: reading, parsing and building requests, in front of a
// pipeline that answers at once (the kernel's part is measured in the lab).
func BenchmarkRestoreUserPart(b *testing.B) {
	b.Run("ipv4", func(b *testing.B) {
		benchmarkRestoreUserPart(b, func(s int) string { return fmt.Sprintf("10.0.%d.%d:80", s/250, s%250+1) },
			func(s, d int) string { return fmt.Sprintf("192.168.%d.%d:80", d+1, s%250+1) })
	})
	// As the lab benchmark's IPv6 layout writes them.
	b.Run("ipv6", func(b *testing.B) {
		benchmarkRestoreUserPart(b, func(s int) string { return fmt.Sprintf("[2001:db8::%x:%x]:80", s/250, s%250+1) },
			func(s, d int) string { return fmt.Sprintf("[2001:db8:1::%x:%x]:80", d+1, s%250+1) })
	})
}

func benchmarkRestoreUserPart(b *testing.B, vip func(s int) string, rip func(s, d int) string) {
	var in bytes.Buffer
	for s := range 1000 {
		fmt.Fprintf(&in, "-A -t %s -s wlc\n", vip(s))
		for d := range 10 {
			fmt.Fprintf(&in, "-a -t %s -r %s -m -w 1\n", vip(s), rip(s, d))
		}
	}
	env := Env{
		Open:          func() (ipvs.Client, error) { return instant{ipvstest.New()}, nil },
		Resolver:      testResolver(b),
		RestoreEngine: Pipelined(DefaultWindow),
	}
	b.ReportAllocs()
	for b.Loop() {
		if st := Main([]string{"ipvsadm", "-R"}, bytes.NewReader(in.Bytes()), io.Discard, io.Discard, env); st != 0 {
			b.Fatalf("status %d", st)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/11000, "ns/line")
}

// instant is a client whose changes succeed without being applied.
type instant struct{ *ipvstest.Fake }

func (instant) Pipeline(int) ipvs.Pipeline { return instantPipeline{} }

type instantPipeline struct{}

func (instantPipeline) Submit(_ ipvs.Request, done func(error)) error { done(nil); return nil }
func (instantPipeline) Flush() error                                  { return nil }
