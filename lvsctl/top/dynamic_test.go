package top

import (
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
)

// TestDynamicWeightDetail: i on a real server whose weight its dynamic
// check set says so beside the weight; a line whose weight is the file's
// says nothing more, and neither does one of a run that stopped.
func TestDynamicWeightDetail(t *testing.T) {
	in := fixture(t0)
	in.Run["-t 10.0.0.1:80 -r 192.168.1.1:80"] = Health{InService: true, Check: "up", Result: "ok", Weight: 4, HasWeight: true, Dynamic: true}
	m := NewModel(time.Second)
	m.Update(in)
	if ls := m.Lines(1, 2, false); !ls[0].DynamicWeight || ls[1].DynamicWeight {
		t.Errorf("DynamicWeight of .1 and .2: %v %v, want true false", ls[0].DynamicWeight, ls[1].DynamicWeight)
	}
	sim := tcell.NewSimulationScreen("UTF-8")
	if err := sim.Init(); err != nil {
		t.Fatal(err)
	}
	defer sim.Fini()
	sim.SetSize(100, 24)
	s := newView(sim, m, false)
	s.Draw()
	special(s, tcell.KeyDown)
	key(s, 'i')
	if got := strings.Join(text(sim), "\n"); !strings.Contains(got, "weight 3/4 (set by its dynamic check)  active 10") {
		t.Errorf("i on .1:\n%s", got)
	}
	key(s, 'x')
	special(s, tcell.KeyDown)
	key(s, 'i')
	if got := strings.Join(text(sim), "\n"); !strings.Contains(got, "-r 192.168.1.2:80") || strings.Contains(got, "dynamic") {
		t.Errorf("i on .2:\n%s", got)
	}
	in.RunActive = false
	m.Update(in)
	if ls := m.Lines(1, 1, false); ls[0].DynamicWeight {
		t.Errorf("a stopped run's dynamic weight still shown")
	}
}
