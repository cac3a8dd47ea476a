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
	var in bytes.Buffer
	for s := range 1000 {
		vip := fmt.Sprintf("10.0.%d.%d:80", s/250, s%250+1)
		fmt.Fprintf(&in, "-A -t %s -s wlc\n", vip)
		for d := range 10 {
			fmt.Fprintf(&in, "-a -t %s -r 192.168.%d.%d:80 -m -w 1\n", vip, d+1, s%250+1)
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
