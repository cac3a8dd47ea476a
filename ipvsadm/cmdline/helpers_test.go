package cmdline

import (
	"path/filepath"
	"testing"

	"github.com/lvskit/lvskit/names"
)

// testResolver reads the golden transcripts' hosts file and Debian's
// services file, never DNS.
func testResolver(t testing.TB) *names.Resolver {
	t.Helper()
	return names.NewResolverFiles(filepath.Join("..", "..", "testscripts", "golden", "hosts"),
		filepath.Join("..", "..", "names", "testdata", "services"), "")
}
