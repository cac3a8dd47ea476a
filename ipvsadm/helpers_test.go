package ipvsadm

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/names"
)

// goldenDir holds the transcripts of the real ipvsadm 1.31.
var goldenDir = filepath.Join("..", "testscripts", "golden")

// testResolver reads the golden transcripts' hosts file and Debian's
// services file, never DNS.
func testResolver(t testing.TB) *names.Resolver {
	t.Helper()
	return names.NewResolverFiles(filepath.Join(goldenDir, "hosts"), filepath.Join("testdata", "services"), "")
}

// result is what one ipvsadm run printed and returned.
type result struct {
	stdout, stderr string
	status         int
}

// runWith runs Main against the fake with the given stdin.
func runWith(t testing.TB, f *ipvstest.Fake, stdin string, args ...string) result {
	t.Helper()
	var out, errb strings.Builder
	env := Env{
		Open:     func() (ipvs.Client, error) { return keepOpen{f}, nil },
		Resolver: testResolver(t),
		ConnFile: filepath.Join(t.TempDir(), "ip_vs_conn"),
	}
	status := Main(append([]string{"ipvsadm"}, args...), strings.NewReader(stdin), &out, &errb, env)
	return result{out.String(), errb.String(), status}
}

func run(t testing.TB, f *ipvstest.Fake, args ...string) result {
	t.Helper()
	return runWith(t, f, "", args...)
}

// keepOpen keeps the fake usable after Main closes its client, as the
// kernel's tables outlive one ipvsadm process.
type keepOpen struct{ *ipvstest.Fake }

func (keepOpen) Close() error { return nil }
