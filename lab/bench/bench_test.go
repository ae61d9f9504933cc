package bench

import (
	"strings"
	"testing"
)

// statOf: the median of an even count is the mean of the middle two.
func TestBenchStat(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want Stat
	}{
		{nil, Stat{}},
		{[]float64{3}, Stat{3, 3, 3}},
		{[]float64{5, 1, 3}, Stat{3, 1, 5}},
		{[]float64{4, 1, 2, 8}, Stat{3, 1, 8}},
	} {
		if got := statOf(c.xs); got != c.want {
			t.Errorf("statOf(%v) = %+v, want %+v", c.xs, got, c.want)
		}
	}
}

// A missed time goal says when no load could have met it here: with
// ggload's load at the case's floor and the rest of its process as
// measured, its process would still be above the goal (a 1 Gbit/s link
// that llama.cpp fills to within 8%); a miss with room below is left bare.
func TestGoalOutOfReach(t *testing.T) {
	row := func(gWall, gLoad, lWall, floor float64) Row {
		r := Row{Case: Case{Mode: "none", Target: "RPC0"}, Floor: floor}
		r.Ggload = Result{WallS: gWall, BestS: gWall, LoadS: gLoad}
		r.Llama = &Result{WallS: lWall, BestS: lWall, LoadS: lWall - 0.15}
		r.Ratio, r.Best = gWall/lWall, gWall/lWall
		return r
	}
	near := goal(row(8.894, 8.830, 9.617, 8.804), true, false)
	if want := "median missed (0.92×), best missed (0.92×), out of reach here: with its load at the floor (8.804 s), ggload's process would take 0.92× llama.cpp's"; !strings.Contains(near, want) {
		t.Errorf("near the floor: %q, want it to hold %q", near, want)
	}
	for _, r := range []Row{
		row(11.2, 11.1, 12.3, 8.8),     // missed, with room below
		row(8.894, 8.830, 10.3, 8.804), // met
		row(8.894, 8.830, 9.617, 0),    // no floor
	} {
		if v := goal(r, true, false); strings.Contains(v, "out of reach") {
			t.Errorf("ggload %.3f s (load %.3f), llama.cpp %.3f s, floor %.3f: %q", r.Ggload.WallS, r.Ggload.LoadS, r.Llama.WallS, r.Floor, v)
		}
	}
	// a cached reload onto a server that takes 3.4 s to touch its new
	// buffers' pages cannot come within 0.2× of llama.cpp's 5.58 s
	cached := row(3.565, 3.495, 5.765, 3.4)
	cached.Llama.LoadS, cached.LoadRatio, cached.TouchFloor = 5.578, 3.495/5.578, 3.4
	cached.Ggload.RPCCached = 698 << 20
	if v, want := goal(cached, true, false), "missed (0.63×; whole process 0.62×), out of reach here: the servers' first touch of their new buffers' pages alone takes 3.400 s, 0.61× llama.cpp's load"; !strings.Contains(v, want) {
		t.Errorf("cached, bound by the server: %q, want it to hold %q", v, want)
	}
	cached.TouchFloor = 0.5 // the server's pages come fast: the miss is the loader's
	if v := goal(cached, true, false); !strings.Contains(v, "missed (0.63×") || strings.Contains(v, "out of reach") {
		t.Errorf("cached, with room below: %q", v)
	}
}
