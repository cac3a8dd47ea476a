package keepalived

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// refusedFor are what the public corpus may be refused for: what lvsctl's
// checks cannot do (decision 0014).
var refusedFor = regexp.MustCompile(`one check per SMTP_CHECK|no such check in lvsctl|not expressible in an lvsctl check|UDP_CHECK without require_reply|sorry_server_inhibit|quorum \d+: |without a port or connect_port`)

// TestPublicCorpus: each configuration taken from a public repository
// (testdata/public, its source in its header) imports to a file lvsctl
// plan accepts (desired.Read and rules.Validate), the same bytes each
// time, or is refused only for what lvsctl cannot do. The lab's
// TestKeepalivedPublicCorpus compares the tables with keepalived's.
func TestPublicCorpus(t *testing.T) {
	paths, err := filepath.Glob("testdata/public/*.conf")
	if err != nil || len(paths) < 30 {
		t.Fatalf("%d configurations in testdata/public, want at least 30 (%v)", len(paths), err)
	}
	converted := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), "# Source: github.com/") {
			t.Errorf("%s: no source in its header", p)
		}
		r, err := Import(p, Options{})
		if err != nil {
			es, ok := err.(Errors)
			if !ok {
				if !refusedFor.MatchString(err.Error()) {
					t.Errorf("%s: %v", p, err)
				}
				continue
			}
			for _, e := range es {
				if !refusedFor.MatchString(e.Msg) {
					t.Errorf("%s: refused for %v", p, e)
				}
			}
			continue
		}
		converted++
		planAccepts(t, p, r)
	}
	t.Logf("%d of %d public configurations converted", converted, len(paths))
}

// planAccepts writes r twice (the same bytes) and reads it as lvsctl plan
// does: desired.Read, then rules.Validate with every module present. The
// corpus's MISC_CHECK program exists in the lab only.
func planAccepts(t *testing.T, p string, r *Result) {
	t.Helper()
	var a, b bytes.Buffer
	if err := WriteYAML(&a, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteYAML(&b, r); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("%s: two writes differ (%v)", p, err)
	}
	set, _, err := desired.Read(p+".yaml", &a, nil)
	if err != nil {
		if !strings.Contains(err.Error(), `"/kaoracle/misc-check": no such file`) {
			t.Errorf("%s: the YAML does not read back: %v", p, err)
		}
		return
	}
	if err := rules.Validate(set, func(string) (bool, error) { return true, nil }); err != nil {
		t.Errorf("%s: rules.Validate: %v", p, err)
	}
}
