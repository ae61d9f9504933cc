package infer

import (
	"math"
	"runtime"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/replay/graph"
)

// maxThreads bounds Params.Threads, as ggload run bounds -t.
const maxThreads = 1024

// compute computes the graph with the thread count the policy gives it,
// on a pool of that many threads.
func (c *Context) compute(st *graph.Step) error {
	n := c.threads.threads(st.ThreadsChangeResults, time.Now())
	c.gc.NThreads, c.gc.Pool.Threads = n, n
	return st.Compute()
}

// defaultPoll is the busy-wait level of llama.cpp's tools' thread pools
// (common_cpu_params.poll).
const defaultPoll = 50

// loadWindow is how long the CPU time of other processes is measured
// over before the thread count follows it again.
const loadWindow = 100 * time.Millisecond

// threadPolicy chooses each graph's CPU thread count. A count that was
// asked for (Params.Threads) is used for every graph, as llama.cpp's -t
// is. Left to the default, the count is the physical cores while the
// machine has them free, and follows the cores other processes leave
// free when it is busy: the CPU backend's threads wait for each other
// at every node by spinning, so that more threads than free cores make
// each node wait for a thread the kernel is not running, and a decode
// beside two busy processes on two cores takes tens of times longer
// than alone, where fewer threads take the share of the machine that
// is left. A graph whose results depend on the count
// (Step.ThreadsChangeResults) always takes the full count, so that the
// results never depend on the load.
type threadPolicy struct {
	fixed int // Params.Threads; 0: follow the load
	max   int // the pool's threads
	cpus  int // the logical CPUs the process may run on

	meter loadMeter // nil: no measure of the load (all but Linux)
	at    time.Time // the last sample's time
	last  cpuSample
	n     int // the count while the load holds
}

// cpuSample is the CPU time, in seconds, that the machine's CPUs spent
// busy (every process's, the kernel's and stolen), and that this process
// spent.
type cpuSample struct {
	busy, own float64
}

// loadMeter reads the machine's load.
type loadMeter interface {
	// sample is the CPU time so far.
	sample() (cpuSample, bool)
	// running is the count of threads on the machine that can run now,
	// this one included.
	running() (int, bool)
}

func newThreadPolicy(fixed int, meter loadMeter, now time.Time) *threadPolicy {
	p := &threadPolicy{fixed: fixed, max: fixed, cpus: runtime.NumCPU(), meter: meter}
	if fixed > 0 {
		return p
	}
	p.max = ggml.MathThreads()
	p.n = p.max
	if meter == nil {
		return p
	}
	if r, ok := meter.running(); ok {
		// until the first window: the CPUs the threads that can run now
		// leave free (this one is the caller's)
		p.n = p.fit(float64(r - 1))
	}
	if s, ok := meter.sample(); ok {
		p.at, p.last = now, s
	}
	return p
}

// threads is the count for the next graph; changesResults says whether
// the graph's results depend on it.
func (p *threadPolicy) threads(changesResults func() bool, now time.Time) int {
	if p.fixed > 0 {
		return p.fixed
	}
	if p.meter != nil && !p.at.IsZero() && now.Sub(p.at) >= loadWindow {
		if s, ok := p.meter.sample(); ok {
			others := ((s.busy - p.last.busy) - (s.own - p.last.own)) / now.Sub(p.at).Seconds()
			p.n = p.fit(others)
			p.at, p.last = now, s
		}
	}
	if p.n < p.max && changesResults() {
		return p.max
	}
	return p.n
}

// fit is the thread count for the CPUs that others leave free: their
// share of the physical cores, rounded, from one to all of them.
func (p *threadPolicy) fit(others float64) int {
	free := max(float64(p.cpus)-others, 0)
	n := int(math.Round(free * float64(p.max) / float64(p.cpus)))
	return min(max(n, 1), p.max)
}
