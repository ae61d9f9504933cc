package infer

import (
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
)

// fakeLoad is a machine whose other processes keep `others` CPUs busy,
// with this process using `own` of them; its clock is the caller's.
type fakeLoad struct {
	others, own float64 // CPUs
	start       time.Time
	now         *time.Time
	running0    int
	broken      bool
}

func (f *fakeLoad) sample() (cpuSample, bool) {
	if f.broken {
		return cpuSample{}, false
	}
	d := f.now.Sub(f.start).Seconds()
	return cpuSample{busy: (f.others + f.own) * d, own: f.own * d}, true
}

func (f *fakeLoad) running() (int, bool) { return f.running0, !f.broken }

func TestThreadPolicy(t *testing.T) {
	now := time.Unix(1000, 0)
	yes := func() bool { return true }
	no := func() bool { return false }
	cores := ggml.MathThreads()

	// a count asked for is every graph's, whatever the load
	busy := &fakeLoad{others: 64, start: now, now: &now, running0: 65}
	p := newThreadPolicy(3, busy, now)
	for range 3 {
		now = now.Add(time.Second)
		if n := p.threads(no, now); n != 3 {
			t.Fatalf("fixed 3 threads: %d", n)
		}
	}

	// the default on an idle machine: the physical cores
	now = time.Unix(1000, 0)
	idle := &fakeLoad{start: now, now: &now, running0: 1}
	p = newThreadPolicy(0, idle, now)
	if p.max != cores || p.threads(no, now) != cores {
		t.Fatalf("idle: max %d, threads %d, want the %d physical cores", p.max, p.threads(no, now), cores)
	}

	// others running when the context is made: one thread at once, and
	// the full count again once a window shows the CPUs free
	now = time.Unix(1000, 0)
	l := &fakeLoad{start: now, now: &now, running0: 1 + 2*p.cpus}
	p = newThreadPolicy(0, l, now)
	if n := p.threads(no, now); n != 1 {
		t.Fatalf("busy at the start: %d threads, want 1", n)
	}
	now = now.Add(loadWindow / 2)
	if n := p.threads(no, now); n != 1 {
		t.Fatalf("within the first window: %d threads, want 1 still", n)
	}
	now = now.Add(loadWindow)
	if n := p.threads(no, now); n != cores {
		t.Fatalf("after an idle window: %d threads, want %d", n, cores)
	}

	// others keep every CPU busy: one thread, whose own CPU time is not
	// counted as theirs
	l.others, l.own, l.start = float64(p.cpus), 1, now
	p.at, p.last = now, cpuSample{}
	now = now.Add(2 * loadWindow)
	if n := p.threads(no, now); n != 1 {
		t.Fatalf("every CPU busy: %d threads, want 1", n)
	}
	// but a graph whose results depend on the count takes them all
	if n := p.threads(yes, now); n != cores {
		t.Fatalf("a graph whose results depend on the count: %d threads, want %d", n, cores)
	}

	// half the CPUs busy: half the cores (at least one)
	if p.cpus >= 2 {
		l.others, l.own, l.start = float64(p.cpus)/2, 0, now
		p.at, p.last = now, cpuSample{}
		now = now.Add(2 * loadWindow)
		want := max(1, min(cores, int(float64(p.cpus)/2*float64(cores)/float64(p.cpus)+0.5)))
		if n := p.threads(no, now); n != want {
			t.Fatalf("half the CPUs busy: %d threads, want %d", n, want)
		}
	}

	// no measure of the load: the physical cores
	p = newThreadPolicy(0, nil, now)
	if n := p.threads(no, now.Add(time.Hour)); n != cores {
		t.Fatalf("no load meter: %d threads, want %d", n, cores)
	}
	p = newThreadPolicy(0, &fakeLoad{broken: true, now: &now}, now)
	if n := p.threads(no, now.Add(time.Hour)); n != cores {
		t.Fatalf("an unreadable load: %d threads, want %d", n, cores)
	}
}

// The meter of this system reads: CPU time that grows as this process
// spins, and a count of running threads that includes this one.
func TestLoadMeter(t *testing.T) {
	m := newLoadMeter()
	if m == nil {
		t.Skip("no load meter on this system: the thread count is the physical cores")
	}
	s0, ok := m.sample()
	if !ok {
		t.Fatal("no sample")
	}
	// spin until 30 ms of CPU time are counted (on a busy machine that
	// takes longer than 30 ms)
	var s1 cpuSample
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		if s1, ok = m.sample(); !ok {
			t.Fatal("no second sample")
		}
		if s1.own-s0.own >= 0.03 {
			break
		}
	}
	if s1.own-s0.own < 0.03 || s1.busy-s0.busy < 0.01 {
		t.Errorf("spinning: own CPU time %.3f s, the CPUs' busy time %.3f s", s1.own-s0.own, s1.busy-s0.busy)
	}
	if n, ok := m.running(); !ok || n < 1 {
		t.Errorf("running threads: %d, %v", n, ok)
	}
}
