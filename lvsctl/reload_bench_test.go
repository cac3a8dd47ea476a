package lvsctl

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lvskit/lvskit/ipvs/ipvstest"
)

// runDocument is 1,000 services × 10 TCP-checked real servers, the size
// of the side-by-side with keepalived; reloaded, service 0 gains a real
// server and service 1's first one weighs 2.
func runDocument(reloaded bool) string {
	var b strings.Builder
	b.WriteString("version: 2\nservices:\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "  - {protocol: tcp, address: 10.100.%d.%d, port: 80, scheduler: wrr,\n     check: {type: tcp, interval: 20s, timeout: 5s},\n     destinations: [\n", i/250, i%250+1)
		n := 10
		if reloaded && i == 0 {
			n++
		}
		for k := range n {
			w := 1
			if reloaded && i == 1 && k == 0 {
				w = 2
			}
			fmt.Fprintf(&b, "       {address: 10.200.%d.%d, port: %d, method: masq, weight: %d},\n", k, i%250+1, 8000+i/250, w)
		}
		b.WriteString("     ]}\n")
	}
	return b.String()
}

// BenchmarkRunReload is lvsctl run's start and SIGHUP reload of
// runDocument on the fake kernel (probes answered at once), with the
// process's peak RSS.
func BenchmarkRunReload(b *testing.B) {
	for b.Loop() {
		f := ipvstest.New()
		file := filepath.Join(b.TempDir(), "director.yaml")
		if err := os.WriteFile(file, []byte(runDocument(false)), 0o600); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		h := startRun(b, f, file, testEnv(b, f))
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "start-ms")
		if err := os.WriteFile(file, []byte(runDocument(true)), 0o600); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		h.reload <- syscall.SIGHUP
		for s := range h.ready {
			if strings.HasPrefix(s, "READY=1") {
				break
			}
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "reload-ms")
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-heap-MiB")
		h.stop(b)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-after-stop-MiB")
		runtime.KeepAlive(f)
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-rss-MiB")
	}
}
