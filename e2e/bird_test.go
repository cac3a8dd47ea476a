package e2e

import (
	"strings"
	"testing"
)

// The generator's text is tested in lvsprep/birdconf; this checks that the
// lab's arguments reach it.
func TestBirdConfigs(t *testing.T) {
	r := routerBirdConfig("10.2.0.1", 65000, 65001, []string{"10.2.0.11", "10.2.0.12"}, 3)
	for _, want := range []string{
		"router id 10.2.0.1;", "log stderr all;", "merge paths on;", "local 10.2.0.1 as 65000;", "hold time 3;", "keepalive time 1;",
		"protocol bgp director_10_2_0_11 from director { neighbor 10.2.0.11 as 65001; }",
		"protocol bgp director_10_2_0_12 from director { neighbor 10.2.0.12 as 65001; }",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("router config lacks %q:\n%s", want, r)
		}
	}
	d := directorBirdConfig("10.2.0.11", 65001, "10.2.0.1", 65000, "10.3.0.1", 30)
	for _, want := range []string{
		"route 10.3.0.1/32 unreachable;", "local 10.2.0.11 as 65001;", "neighbor 10.2.0.1 as 65000;",
		`export where proto = "announced";`, "import none;", "hold time 30;", "keepalive time 10;",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("director config lacks %q:\n%s", want, d)
		}
	}
	a := announceBirdConfig("10.2.0.11", 65001, "10.2.0.1", 65000, 3)
	if !strings.Contains(a, `interface "lvs-announce";`) || strings.Contains(a, "protocol static") {
		t.Errorf("announcing director config:\n%s", a)
	}
}
