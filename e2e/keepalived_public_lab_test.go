//go:build lab

package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// publicDir holds keepalived configurations taken from public
// repositories (each names its source in its header).
const publicDir = "../rules/keepalived/testdata/public"

// TestKeepalivedPublicCorpus runs TestKeepalivedOracle's comparison on
// the public corpus: keepalived 2.2.7 and lvsctl import + run give the same
// ipvsadm -Sn with every real server up, after one fails and after it
// returns (keepalived deleting a failed server that lvsctl holds at weight
// 0 aside). A configuration lvsctl refuses is checked to load in
// keepalived and to be refused, with its reasons logged.
// make lab LAB_ARGS='-vms 1 -run TestKeepalivedPublicCorpus/NAME ./e2e'
// runs one.
func TestKeepalivedPublicCorpus(t *testing.T) {
	runKeepalivedCorpus(t, publicDir, "kp")
}

// publicTimer is a timer line of the public corpus; a trailing comment or
// extra words stay.
var publicTimer = regexp.MustCompile(`(?m)^(\s*(?:delay_loop|delay_before_retry|connect_timeout|misc_timeout))\s+[0-9.]+\b`)

// publicBlock opens a virtual_server block on its line; the braces of a
// definition's use (${NAME}) are no block.
var publicBlock = regexp.MustCompile(`(?m)^(\s*virtual_server\s(?:[^{$\n]|\$\{[^}\n]*\}|\$)*\{)`)

// quickPublic copies a public configuration and the directory of its
// includes (its name without .conf) under oracleRun with quick timers:
// delay_loop 4 at the start of each virtual server (keepalived's default
// is 60 s) and every delay_loop at 4 s, connect_timeout at 2 s (a TLS
// handshake is slow on the lab's emulated processor, 8 cases at a time),
// misc_timeout at 3 s and delay_before_retry at 2 s, so that both
// directors notice a failure in seconds. The copy in the
// tree stays as it was found.
func quickPublic(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(oracleRun, "public")
	quick := func(data []byte) []byte {
		data = publicBlock.ReplaceAll(data, []byte("$1 delay_loop 4"))
		return publicTimer.ReplaceAllFunc(data, func(m []byte) []byte {
			kw := strings.Fields(string(m))[0]
			v := map[string]string{"delay_loop": "4", "connect_timeout": "2", "misc_timeout": "3"}[kw]
			if v == "" {
				v = "2"
			}
			return []byte(publicTimer.ReplaceAllString(string(m), "${1} "+v))
		})
	}
	copyOne := func(src, to string) {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, quick(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := filepath.Base(path)
	copyOne(path, filepath.Join(dst, base))
	inc := strings.TrimSuffix(path, ".conf")
	if fi, err := os.Stat(inc); err == nil && fi.IsDir() {
		err := filepath.WalkDir(inc, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(filepath.Dir(path), p)
			copyOne(p, filepath.Join(dst, rel))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dst, base)
}
