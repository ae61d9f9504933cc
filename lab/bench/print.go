package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Print writes the report of the load modes as text: the table, each
// device's pipeline, and the goals (Run prints the floors before, as they
// are measured).
func Print(w io.Writer, rep Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\ttarget\tfloor s\tggload load s\t×floor\twall s\textra/limit MiB\tllama.cpp load s\t×floor\twall s\tratio\tbest\tload ratio\t")
	for _, r := range rep.Rows {
		cols := []string{r.Mode, r.Target, secs(r.Floor)}
		g := r.Ggload
		if g.Err != "" {
			cols = append(cols, "error", "", "", "")
		} else {
			cols = append(cols, statString(g.Load), times(r.OfFloor), statString(g.Wall), fmt.Sprintf("%s/%s", mibs(g.ExtraRSS), mibs(int64(r.MemLimit))))
		}
		switch {
		case r.Llama == nil:
			cols = append(cols, "", "", "", "", "", "")
		case r.Llama.Err != "":
			cols = append(cols, "error", "", "", "", "", "")
		default:
			l := r.Llama
			cols = append(cols, statString(l.Load), times(r.LlamaOfFloor), statString(l.Wall), times(r.Ratio), times(r.Best), times(r.LoadRatio))
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintf(w, "times in s, median [min–max] of the runs; ×floor: the median load over this machine's floor for the case (the fastest the case can be here: what its reads and uploads cost alone); ratio: ggload's median whole-process time over llama.cpp's (best: the fastest runs'; load ratio: the load calls')\n")
	fmt.Fprintf(w, "extra: peak RSS − the idle process (%.0f MiB; %.0f MiB with the CPU's and RPC's backend modules alone, ggload's onto the CPU and RPC servers) − what the load keeps in host memory by design; limit: the staging and bounce memory ggload holds by design (direct reads' included) + 16 MiB per device (+ the RPC client's two queued messages per server, each the biggest tensor)\n", float64(rep.BaselineRSS)/(1<<20), float64(rep.BaselineCPURSS)/(1<<20))
	printKernel(w, rep)
	printBounced(w, rep)
	printBackends(w, rep)
	for _, r := range rep.Rows {
		if len(r.Devices) > 1 || r.Solo != nil {
			fmt.Fprintf(w, "%s→%s, per device (at once", r.Mode, r.Target)
			if r.Sequential != nil && r.Sequential.Err == "" {
				fmt.Fprintf(w, "; alone: one after another, %s s in all", statString(r.Sequential.Load))
			}
			fmt.Fprintln(w, "):")
			for _, d := range r.Devices {
				fmt.Fprintf(w, "  %-10s %8.1f MiB  %s s at once", d.Device, float64(d.Bytes)/(1<<20), statString(d.S))
				for _, s := range r.Solo {
					if s.Device == d.Device {
						fmt.Fprintf(w, ", %s s alone", statString(s.S))
					}
				}
				fmt.Fprintf(w, "; staging %s MiB, bounce %s MiB\n", mibs(int64(d.Staging)), mibs(int64(d.Bounce)))
			}
		}
	}
	printFastest(w, rep)
	for _, r := range rep.Rows {
		if r.Goal != "" {
			fmt.Fprintf(w, "%s→%s: %s\n", r.Mode, r.Target, r.Goal)
		}
		if r.Ggload.Err != "" {
			fmt.Fprintf(w, "%s→%s: ggload: %s\n", r.Mode, r.Target, r.Ggload.Err)
		}
		if r.Sequential != nil && r.Sequential.Err != "" {
			fmt.Fprintf(w, "%s→%s: ggload, one device after another: %s\n", r.Mode, r.Target, r.Sequential.Err)
		}
		if r.Llama != nil && r.Llama.Err != "" {
			fmt.Fprintf(w, "%s→%s: llama.cpp: %s\n", r.Mode, r.Target, r.Llama.Err)
		}
	}
}

// printBackends says where ggload's process registered fewer backends
// than llama.cpp's: its start is part of the whole-process time.
func printBackends(w io.Writer, rep Report) {
	for _, r := range rep.Rows {
		if l := r.Llama; l != nil && l.Err == "" && r.Ggload.Err == "" && len(r.Ggload.Backends) < len(l.Backends) {
			fmt.Fprintf(w, "%s→%s: ggload's process registers the backends %s alone (no weight goes past the CPU and RPC servers), llama.cpp's every one of the set, %s, as its tools load them whatever -dev says\n",
				r.Mode, r.Target, strings.Join(r.Ggload.Backends, ", "), strings.Join(l.Backends, ", "))
		}
	}
}

// printBounced says which cases' direct reads went through bounce
// buffers: a read goes straight into place only where the memory it fills
// lines up with the disk's direct-I/O blocks as the file does (on a disk
// that needs 512-byte aligned memory, a CPU buffer lines up with 1 file
// in 16), and is copied once more otherwise.
func printBounced(w io.Writer, rep Report) {
	for _, r := range rep.Rows {
		if n := r.Ggload.DirectCopied; n > 0 {
			fmt.Fprintf(w, "%s→%s: direct reads copied %.2f MiB of the %.2f GiB model out of bounce buffers (where the memory read into does not line up with the disk's direct-I/O blocks as the file does)\n",
				r.Mode, r.Target, float64(n)/(1<<20), float64(rep.Bytes)/(1<<30))
		}
	}
}

// printKernel prints the kernel's share of each case's load calls, where
// it was measured: a run much slower than the others with much more kernel
// time waited on fresh pages or on the disk, not on the loader.
func printKernel(w io.Writer, rep Report) {
	var lines []string
	for _, r := range rep.Rows {
		var parts []string
		if k := r.Ggload.Kernel; k != nil {
			parts = append(parts, "ggload "+statString(*k))
		}
		if r.Llama != nil && r.Llama.Kernel != nil {
			parts = append(parts, "llama.cpp "+statString(*r.Llama.Kernel))
		}
		if len(parts) > 0 {
			lines = append(lines, fmt.Sprintf("  %s→%s: %s", r.Mode, r.Target, strings.Join(parts, ", ")))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "kernel time in the load calls, s (the CPU time the kernel spent for the process, all threads: page faults, fresh pages zeroed, reads and copies in system calls):")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func statString(s Stat) string {
	if s.Min == s.Max {
		return fmt.Sprintf("%.3f", s.Median)
	}
	return fmt.Sprintf("%.3f [%.3f–%.3f]", s.Median, s.Min, s.Max)
}

func secs(s float64) string {
	if s <= 0 {
		return ""
	}
	return fmt.Sprintf("%.3f", s)
}

func times(x float64) string {
	if x <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", x)
}

func mibs(n int64) string { return fmt.Sprintf("%.0f", float64(n)/(1<<20)) }

// Goals for single devices: the most ggload's median whole-process time
// may be of llama.cpp's, by mode and target (any local GPU for "gpu");
// every other case's is defaultRatioGoal: at most 0.9× llama.cpp's.
var ratioGoals = map[string]float64{
	"none/none": 0.5, "mmap/none": 1.0,
	"none/gpu": 0.8, "mmap/gpu": 0.8, "dio/gpu": 1.0,
}

const defaultRatioGoal = 0.9

// Goals of cold loads (--cold): every mode within 0.9× llama.cpp's time,
// and direct I/O within 1.25× the cold floor.
const (
	coldRatioGoal = 0.9
	coldDioGoal   = 1.25
)

func ratioGoal(mode, target string) float64 {
	if want, ok := ratioGoals[mode+"/"+target]; ok {
		return want
	}
	return defaultRatioGoal
}

// cachedReloadGoal is the goal of a reload from RPC servers whose file
// caches hold the weights (ggml-rpc-server -c, warm): of llama.cpp's time,
// the load calls'.
const cachedReloadGoal = 0.2

// Goals for several devices.
const (
	rpcHostsGoal = 0.55 // RPC servers only: of llama.cpp's time
	soloGoal     = 1.15 // with a local device: of the slowest device's time alone
)

func isRPCName(d string) bool { return strings.HasPrefix(d, "RPC") }

// goal states the case's goals and whether they were met: the time
// against llama.cpp's (or, beside a local device, against the slowest
// device alone) and the extra memory against its limit. layerSplit: the
// devices hold whole layers (the goals of several devices are theirs).
func goal(r Row, layerSplit, cold bool) string {
	var parts []string
	devs := r.Case.Devices()
	ratio := func(want float64) {
		if cold {
			want = coldRatioGoal
		}
		if r.Llama != nil && r.Ratio > 0 {
			v := fmt.Sprintf("time ≤ %.2f× llama.cpp's: median %s (%.2f×), best %s (%.2f×)", want, yesNo(r.Ratio <= want), r.Ratio, yesNo(r.Best <= want), r.Best)
			if at := atFloor(r); r.Ratio > want && at > want {
				v += fmt.Sprintf(", out of reach here: with its load at the floor (%.3f s), ggload's process would take %.2f× llama.cpp's", r.Floor, at)
			}
			parts = append(parts, v)
		}
	}
	switch {
	case r.Target == "none":
		ratio(ratioGoal(r.Mode, "none"))
	case len(devs) == 1 && !isRPCName(devs[0]):
		ratio(ratioGoal(r.Mode, "gpu"))
	case len(devs) == 1:
		ratio(defaultRatioGoal)
	case !layerSplit:
		ratio(defaultRatioGoal)
	case len(devs) > 1:
		allRPC := true
		for _, d := range devs {
			allRPC = allRPC && isRPCName(d)
		}
		if allRPC {
			ratio(rpcHostsGoal)
		} else if slowest := slowestSolo(r); slowest > 0 && r.Ggload.Err == "" {
			x := r.Ggload.LoadS / slowest
			parts = append(parts, fmt.Sprintf("load ≤ %.2f× the slowest device alone (%.3f s): %s (%.2f×)", soloGoal, slowest, yesNo(x <= soloGoal), x))
		} else {
			ratio(defaultRatioGoal)
		}
	}
	if n := r.Ggload.RPCCached; n > 0 && !cold && r.Ggload.Err == "" && r.Llama != nil && r.LoadRatio > 0 {
		// the servers' caches set weights in every run: a reload, whose
		// load calls are held to the cached reload's goal (the whole
		// process also counts the start-up both loaders share)
		v := fmt.Sprintf("cached reload (the servers' file caches set %s MiB): load ≤ %.2f× llama.cpp's: %s (%.2f×; whole process %.2f×)",
			mibs(int64(n)), cachedReloadGoal, yesNo(r.LoadRatio <= cachedReloadGoal), r.LoadRatio, r.Ratio)
		if at := r.TouchFloor / r.Llama.LoadS; r.LoadRatio > cachedReloadGoal && at > cachedReloadGoal {
			v += fmt.Sprintf(", out of reach here: the servers' first touch of their new buffers' pages alone takes %.3f s, %.2f× llama.cpp's load", r.TouchFloor, at)
		}
		parts = append(parts, v)
	}
	if cold && (r.Mode == "dio" || r.Mode == "direct-io") && r.Ggload.Err == "" && r.OfFloor > 0 {
		parts = append(parts, fmt.Sprintf("load ≤ %.2f× the cold floor: %s (%.2f×)", coldDioGoal, yesNo(r.OfFloor <= coldDioGoal), r.OfFloor))
	}
	if r.Ggload.Err == "" && r.MemLimit > 0 {
		parts = append(parts, fmt.Sprintf("extra RSS ≤ the limit: %s (%s of %s MiB)", yesNo(r.Ggload.ExtraRSS <= int64(r.MemLimit)), mibs(r.Ggload.ExtraRSS), mibs(int64(r.MemLimit))))
	}
	if len(parts) == 0 {
		return "no goal to judge: " + why(r)
	}
	return strings.Join(parts, "; ")
}

// atFloor is the least ggload's median whole-process time could be of
// llama.cpp's: ggload's process with its load call taking the case's
// floor instead, the rest (start-up, plan, teardown) as measured. Above a
// ratio goal, no load can meet that goal on this machine: llama.cpp's own
// load is too near the floor. 0 where the case has no floor.
func atFloor(r Row) float64 {
	if r.Floor <= 0 || r.Llama == nil || r.Llama.WallS <= 0 || r.Ggload.WallS <= 0 {
		return 0
	}
	rest := max(r.Ggload.WallS-r.Ggload.LoadS, 0)
	return (rest + r.Floor) / r.Llama.WallS
}

// why says what a case without a verdict lacks.
func why(r Row) string {
	switch {
	case r.Ggload.Err != "":
		return "ggload's load failed"
	case r.Llama == nil:
		return "llama.cpp was not run (--no-llama)"
	case r.Llama.Err != "":
		return "llama.cpp's load failed"
	}
	return "no time or memory was measured"
}

// slowestSolo is the largest median time of a device loading alone.
func slowestSolo(r Row) float64 {
	s := 0.0
	for _, d := range r.Solo {
		s = max(s, d.S.Median)
	}
	return s
}

func yesNo(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// printFastest names, per target timed in several modes, the mode whose
// median load was fastest, ggload's and llama.cpp's, and, cold, how much
// of the file was still cached when a process began.
func printFastest(w io.Writer, rep Report) {
	cache := "warm page cache"
	if rep.Cold {
		cache = "cold page cache"
	}
	type best struct {
		mode  string
		s     float64
		modes int
	}
	var order []string
	byTarget := map[string]*[2]best{}
	for _, r := range rep.Rows {
		b := byTarget[r.Target]
		if b == nil {
			b = &[2]best{}
			byTarget[r.Target] = b
			order = append(order, r.Target)
		}
		for i, impl := range []*Result{&r.Ggload, r.Llama} {
			if impl == nil || impl.Err != "" || impl.LoadS <= 0 {
				continue
			}
			b[i].modes++
			if b[i].mode == "" || impl.LoadS < b[i].s {
				b[i].mode, b[i].s = r.Mode, impl.LoadS
			}
		}
	}
	for _, t := range order {
		b := byTarget[t]
		if b[0].modes < 2 {
			continue
		}
		fmt.Fprintf(w, "%s, onto %s: the fastest mode is %s for ggload (%.3f s)", cache, t, b[0].mode, b[0].s)
		if b[1].modes >= 2 {
			fmt.Fprintf(w, ", %s for llama.cpp (%.3f s)", b[1].mode, b[1].s)
		}
		fmt.Fprintln(w)
	}
	if rep.Cold {
		most := 0.0
		for _, r := range rep.Rows {
			most = max(most, r.ColdResident)
		}
		fmt.Fprintf(w, "cold: at most %.1f%% of the file's pages were in the page cache when a process began\n", 100*most)
	}
}
