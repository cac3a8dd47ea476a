package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/rules/desired"
)

// TestVRRPPageShowsTheLabsFiles: docs/vrrp.md shows exactly the
// keepalived.conf and director.yaml that TestVRRP proves, and the YAML
// reads as a desired state with checks.
func TestVRRPPageShowsTheLabsFiles(t *testing.T) {
	page, err := os.ReadFile("../docs/vrrp.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]bool{}
	for _, part := range strings.Split(string(page), "```")[1:] {
		_, body, _ := strings.Cut(part, "\n")
		blocks[body] = true
	}
	for name, want := range map[string]string{
		"keepalived.conf of dir1": vrrpKeepalived("dir1", 150),
		"director.yaml":           vrrpDirector,
	} {
		if !blocks[want] {
			t.Errorf("docs/vrrp.md has no block with the lab's %s:\n%s", name, want)
		}
	}
	if set, health, err := desired.Read("director.yaml", strings.NewReader(vrrpDirector), nil); err != nil || len(set.Services) != 1 || health == nil {
		t.Errorf("the director.yaml does not read as one service with checks: %v", err)
	}
	dir2 := strings.NewReplacer("router_id dir1", "router_id dir2", "priority 150", "priority 100").Replace(vrrpKeepalived("dir1", 150))
	if dir2 != vrrpKeepalived("dir2", 100) || !strings.Contains(string(page), "with `router_id dir2` and `priority 100`") {
		t.Errorf("the page's dir2 is not dir1's file with router_id dir2 and priority 100")
	}
}
