package packaging_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// userDocs are the user documentation's files, as the packages install them
// in /usr/share/doc/lvskit: README.md and these pages of docs/. lvsctl(8)
// and lvsctl's messages point at them there.
var userDocs = []string{"README.md", "lvsctl.md", "health.md", "lvsprep.md", "migrate-keepalived.md",
	"scale-out.md", "vrrp.md", "compatibility.md", "packaging.md"}

// userDocSource is where a user doc is in the source tree, from here.
func userDocSource(name string) string {
	if name == "README.md" {
		return "../README.md"
	}
	return "../docs/" + name
}

// TestUserDocsListedAlike: the Makefile's USERDOCS and nfpm.yaml's entries
// for the .deb and the .rpm name the same files, which exist.
func TestUserDocsListedAlike(t *testing.T) {
	for _, d := range userDocs {
		if _, err := os.Stat(userDocSource(d)); err != nil {
			t.Errorf("user doc %s: %v", d, err)
		}
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USERDOCS\s*=\s*README\.md \$\(addprefix docs/,([^)]*)\)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile's USERDOCS is not README.md $(addprefix docs/,...)")
	}
	fromMake := append([]string{"README.md"}, strings.Fields(string(m[1]))...)
	if !slices.Equal(fromMake, userDocs) {
		t.Errorf("the Makefile's USERDOCS %q, want %q", fromMake, userDocs)
	}
	y, err := os.ReadFile("nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	byPackager := map[string][]string{}
	re := regexp.MustCompile(`(?m)^  - src: (\S+)\n    dst: /usr/share/doc/lvskit/(\S+\.md)\n(?:    type: doc\n)?    packager: (deb|rpm)\n`)
	for _, e := range re.FindAllStringSubmatch(string(y), -1) {
		if e[1] != strings.TrimPrefix(userDocSource(e[2]), "../") {
			t.Errorf("nfpm.yaml installs %s as %s", e[1], e[2])
		}
		byPackager[e[3]] = append(byPackager[e[3]], e[2])
	}
	for _, p := range []string{"deb", "rpm"} {
		if !slices.Equal(byPackager[p], userDocs) {
			t.Errorf("nfpm.yaml's user docs for the %s: %q, want %q", p, byPackager[p], userDocs)
		}
	}
}
