package list_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/names"
)

// FuzzConnections: the parser of /proc/net/ip_vs_conn on any file. It
// must end without a panic, and a listing it accepts starts with the
// title.
func FuzzConnections(f *testing.F) {
	f.Add([]byte("Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData\n"+
		"TCP 0A000001 0050 0A000002 0050 C0A80001 0050 ESTABLISHED    899\n"+
		"UDP 0A000001 0035 0A000002 0035 C0A80001 0035 UDP            299 sip abc\n"), true)
	f.Add([]byte("Pro FromIP FPrt ToIP TPrt DestIP DPrt State Expires PEName PEData\n"+
		"TCP 2001:0db8:0000:0000:0000:0000:0000:0001 0050 2001:0db8:0000:0000:0000:0000:0000:0002 0050 2001:0db8:0000:0000:0000:0000:0000:0003 0050 SYN_RECV 59\n"), false)
	f.Add([]byte(""), false)
	f.Add([]byte("x\nTCP 0A000001 0050\n"), false)
	resolver := names.NewResolverFiles(filepath.Join("..", "..", "testscripts", "golden", "hosts"), filepath.Join("..", "testdata", "services"), "")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, persist bool) {
		path := filepath.Join(dir, "ip_vs_conn")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, numeric := range []bool{true, false} {
			var out bytes.Buffer
			err := list.Connections(&out, path, persist, list.Options{Numeric: numeric, Resolver: resolver})
			if err == nil && !bytes.HasPrefix(out.Bytes(), []byte("IPVS connection entries\n")) {
				t.Fatalf("accepted without the title: %q", out.String())
			}
		}
	})
}
