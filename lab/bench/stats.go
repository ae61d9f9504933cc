package bench

import (
	"slices"
)

// measurement is one child process, seen from the parent.
type measurement struct {
	WallS   float64 `json:"wall_s"`
	LoadS   float64 `json:"load_s"`
	PeakRSS uint64  `json:"peak_rss"`
	child   LoadResult
}

// Stat is a figure over a case's runs: the median and the range.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// statOf sums up xs (which it sorts).
func statOf(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	slices.Sort(xs)
	med := xs[len(xs)/2]
	if len(xs)%2 == 0 {
		med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return Stat{Median: med, Min: xs[0], Max: xs[len(xs)-1]}
}

// Result is one loader's figures over a case's runs.
type Result struct {
	Wall Stat `json:"wall"` // whole-process time, s
	Load Stat `json:"load"` // the load call alone, s
	// Kernel is the kernel's CPU time for the process during the load
	// call, s (nil where not measured).
	Kernel   *Stat   `json:"kernel,omitempty"`
	WallS    float64 `json:"wall_s"` // Wall's median
	BestS    float64 `json:"best_s"` // and minimum
	LoadS    float64 `json:"load_s"` // Load's median
	GBps     float64 `json:"gb_per_s"`
	PeakRSS  uint64  `json:"peak_rss"`
	ExtraRSS int64   `json:"extra_rss"` // peak minus the idle process minus what stays resident by design
	// DirectCopied is the most bytes a run's direct reads copied out of
	// bounce buffers (ggload only).
	DirectCopied uint64 `json:"direct_copied,omitempty"`
	// RPCCached is the fewest bytes a run's RPC servers set from their
	// file caches (ggload only): more than 0, every run was a reload.
	RPCCached uint64 `json:"rpc_cached,omitempty"`
	Runs      int    `json:"runs"` // that succeeded
	// Backends are the backends a run's process registered: ggload's
	// onto the CPU and RPC servers alone loads no GPU's module,
	// llama.cpp's tools load every one whatever -dev says
	Backends []string `json:"backends,omitempty"`
	Err      string   `json:"error,omitempty"`
}

// DeviceResult is one device's upload pipeline over a case's runs.
type DeviceResult struct {
	Device  string `json:"device"`
	Bytes   uint64 `json:"bytes"`
	S       Stat   `json:"s"`
	Staging uint64 `json:"staging"`
	Bounce  uint64 `json:"bounce"`
}

// Row is one case of a report: each loader's figures, the ratios, the
// floor and the goals.
type Row struct {
	Case
	Ggload Result `json:"ggload"`
	// Devices are ggload's pipelines, all at once; Solo the same devices
	// one after another (several devices only), each one's time alone.
	Devices    []DeviceResult `json:"devices,omitempty"`
	Sequential *Result        `json:"sequential,omitempty"`
	Solo       []DeviceResult `json:"solo,omitempty"`
	Llama      *Result        `json:"llama,omitempty"`
	Ratio      float64        `json:"ratio,omitempty"`      // ggload / llama.cpp, median whole-process times
	Best       float64        `json:"best_ratio,omitempty"` // the same for the fastest runs
	LoadRatio  float64        `json:"load_ratio,omitempty"` // the same for the load calls' medians
	// Floor is this machine's least time for the case's bytes (the
	// case's Floor); OfFloor the median load call over it.
	Floor        float64 `json:"floor_s,omitempty"`
	OfFloor      float64 `json:"of_floor,omitempty"`
	TouchFloor   float64 `json:"touch_floor_s,omitempty"` // Floor.Touch
	LlamaOfFloor float64 `json:"llama_of_floor,omitempty"`
	// Staging is the memory ggload's pipelines hold by design (rings,
	// bounce buffers); MemLimit what the extra RSS may reach (memLimit).
	Staging  uint64 `json:"staging"`
	MemLimit uint64 `json:"mem_limit"`
	Goal     string `json:"goal,omitempty"`
	// ColdResident (--cold) is the largest share of the model's pages
	// still in the page cache when a process began.
	ColdResident float64 `json:"cold_resident,omitempty"`
}

// Report is what a bench of one model measured: the machine's rates and
// each case's floor, the idle processes, and a Row per case, or the HTTP
// measurements.
type Report struct {
	Model       string           `json:"model"`
	Bytes       int64            `json:"bytes"`
	Runs        int              `json:"runs"`
	MemcpyGBps  float64          `json:"memcpy_gb_per_s"`      // warm destination
	FirstTouch  float64          `json:"first_touch_gb_per_s"` // fresh destination pages
	Rates       Rates            `json:"rates"`
	Floors      map[string]Floor `json:"floors"` // by mode/target
	BaselineRSS uint64           `json:"baseline_rss"`
	// BaselineCPURSS is the idle process with the backend modules of
	// ggload's process onto the CPU and RPC servers alone (the CPU's and
	// RPC's): its baseline there
	BaselineCPURSS uint64      `json:"baseline_cpu_rss"`
	Rows           []Row       `json:"rows"`
	HTTP           *HTTPReport `json:"http,omitempty"`
	Cold           bool        `json:"cold,omitempty"` // --cold: every process began with the model's pages evicted
	Fit            bool        `json:"fit,omitempty"`  // --fit: every load call fitted first (Placement.Fit)
	// FreePageReporting: this is a virtual machine whose balloon reports
	// free memory to its host; BackedMemory is the most the bench faulted
	// in and freed before a process (0: none, --no-back-memory).
	FreePageReporting bool   `json:"free_page_reporting,omitempty"`
	BackedMemory      uint64 `json:"backed_memory,omitempty"`
	// WarmedRPC are the targets with RPC servers that one untimed load
	// went to before the timed runs (warmRPCCaches).
	WarmedRPC []string `json:"warmed_rpc,omitempty"`
}

// perDeviceSlack is the resident memory a device's pipeline may add beyond
// its staging.
const perDeviceSlack = 16 << 20

// memLimit is what a load's extra RSS may reach: the staging, 16 MiB per
// device (at least one), and for an RPC server the messages the native
// client copies tensors into before it sends them (two queued at most,
// each as big as ggload's buffer for the biggest tensor, see package
// loader's RPC queue). Under a meta device over RPC servers the native
// client's message for one tensor and the slices gathered for the next
// (ggml.Tensor.SetSplit) take as much.
func memLimit(c LoadResult) uint64 {
	// a load that moved nothing through a device (every tensor zero-copy
	// on the CPU) still has the host's own slack
	n := c.Staging + uint64(max(len(c.Devices), 1))*perDeviceSlack
	for _, d := range c.Devices {
		if d.RPC {
			n += 2 * d.Bounce
		}
	}
	return n
}

func okOnly(ms []measurement) []measurement {
	var ok []measurement
	for _, m := range ms {
		if m.child.Err == "" {
			ok = append(ok, m)
		}
	}
	return ok
}

func summarize(ms []measurement, size int64, baseRSS uint64) Result {
	var res Result
	ok := okOnly(ms)
	if len(ok) == 0 {
		res.Err = "no measurement"
		for _, m := range ms {
			if m.child.Err != "" {
				res.Err = m.child.Err
			}
		}
		return res
	}
	var wall, load, kernel []float64
	res.RPCCached = ok[0].child.RPCCached
	for _, m := range ok {
		wall, load = append(wall, m.WallS), append(load, m.LoadS)
		if k := m.child.KernelS; k != nil {
			kernel = append(kernel, *k)
		}
		res.PeakRSS = max(res.PeakRSS, m.PeakRSS)
		res.DirectCopied = max(res.DirectCopied, m.child.DirectCopied)
		res.RPCCached = min(res.RPCCached, m.child.RPCCached)
	}
	res.Runs = len(ok)
	res.Backends = ok[0].child.Backends
	res.Wall, res.Load = statOf(wall), statOf(load)
	if len(kernel) == len(ok) {
		k := statOf(kernel)
		res.Kernel = &k
	}
	res.WallS, res.BestS, res.LoadS = res.Wall.Median, res.Wall.Min, res.Load.Median
	res.GBps = float64(size) / res.WallS / 1e9
	// what stays resident by design is the same in every run
	res.ExtraRSS = int64(res.PeakRSS) - int64(baseRSS) - int64(ok[0].child.HostResident)
	return res
}

// deviceSummary sums up the pipelines of successful runs by device.
func deviceSummary(ok []measurement) []DeviceResult {
	var out []DeviceResult
	idx := map[string]int{}
	times := map[string][]float64{}
	for _, m := range ok {
		for _, d := range m.child.Devices {
			i, seen := idx[d.Device]
			if !seen {
				i = len(out)
				idx[d.Device] = i
				out = append(out, DeviceResult{Device: d.Device, Bytes: d.Bytes})
			}
			out[i].Staging = max(out[i].Staging, d.Staging)
			out[i].Bounce = max(out[i].Bounce, d.Bounce)
			times[d.Device] = append(times[d.Device], d.S)
		}
	}
	for i := range out {
		out[i].S = statOf(times[out[i].Device])
	}
	return out
}
