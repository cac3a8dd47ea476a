package record

import (
	"encoding/json"
	"testing"

	"github.com/lvskit/lvskit/health"
)

// TestServerChecks: a record written with one check per server (no
// "checks") still reads, its one check in AllChecks; a server with
// several has them all, Check and Health being the one that decides; and
// its weight in the table adds its dynamic checks' as run does.
func TestServerChecks(t *testing.T) {
	var old Server
	if err := json.Unmarshal([]byte(`{"service":"-t 10.0.0.1:80","destination":"192.168.1.1:80","in_service":false,"weight":3,"check":"tcp",
		"health":{"key":{"addr":"192.168.1.1:80","spec":"{}"},"state":"down","fails":3,"result":"connection refused"}}`), &old); err != nil {
		t.Fatal(err)
	}
	if cs := old.AllChecks(); len(cs) != 1 || cs[0].Check != "tcp" || cs[0].Health.State != health.Down || old.Result() != "connection refused" {
		t.Errorf("an old record's server: checks %+v, result %q", cs, old.Result())
	}

	w7, w9 := uint32(7), uint32(9)
	var s Server
	s.Weight, s.InService = 5, true
	s.SetChecks([]ServerCheck{
		{Check: "http", Health: health.TargetState{State: health.Up}},
		{Check: "exec", Health: health.TargetState{State: health.Up, Weight: &w7}},
		{Check: "exec", Health: health.TargetState{State: health.Up, Weight: &w9}},
	})
	if w, dyn := s.TableWeight(); w != 11 || !dyn {
		t.Errorf("two dynamic checks at 7 and 9 of a file's 5: weight %d (dynamic %v), want 11", w, dyn)
	}
	s.InService = false
	s.SetChecks([]ServerCheck{
		{Check: "tcp", Health: health.TargetState{State: health.Up}},
		{Check: "http", Health: health.TargetState{State: health.Down, Result: "status 503"}},
	})
	if s.Check != "http" || s.Health.State != health.Down || s.Result() != "http: status 503" || len(s.AllChecks()) != 2 {
		t.Errorf("held out by its http check: %+v, result %q", s, s.Result())
	}
}
