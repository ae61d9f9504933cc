package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/ggload/ggload/ggml"
)

func init() {
	register(command{"devices", "[options]", "backends, devices (memory, caps) and their buffer types", runDevices})
	optionSets["devices"] = func() *optionSet {
		rf := defaultRuntimeFlags()
		return devicesOptions(&rf, new(bool))
	}
}

type bufferTypeInfo struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Alignment uint64 `json:"alignment"`
	MaxSize   uint64 `json:"max_size"`
	Host      bool   `json:"host"`
}

type deviceInfo struct {
	Name        string           `json:"name"`
	Description string           `json:"description"`
	Type        string           `json:"type"`
	Backend     string           `json:"backend"`
	DeviceID    string           `json:"device_id,omitempty"`
	MemoryFree  uint64           `json:"memory_free"`
	MemoryTotal uint64           `json:"memory_total"`
	Caps        ggml.Caps        `json:"caps"`
	BufferTypes []bufferTypeInfo `json:"buffer_types"`
}

type devicesReport struct {
	Library  string        `json:"library"`
	Version  string        `json:"ggml_version"`
	Commit   string        `json:"ggml_commit"`
	Backends []backendInfo `json:"backends"`
	Devices  []deviceInfo  `json:"devices"`
	Hint     string        `json:"hint,omitempty"` // why a backend shows no device
}

type backendInfo struct {
	Name    string   `json:"name"`
	Devices []string `json:"devices"`
}

func describeDevices(rt *ggml.Runtime) devicesReport {
	rep := devicesReport{Library: rt.Location().Dir, Version: rt.Version(), Commit: rt.Commit(), Hint: hiddenDevicesHint(rt)}
	for _, r := range rt.Backends() {
		bi := backendInfo{Name: r.Name(), Devices: []string{}}
		for _, d := range r.Devices() {
			bi.Devices = append(bi.Devices, d.Name())
		}
		rep.Backends = append(rep.Backends, bi)
	}
	for _, d := range rt.Devices() {
		p := d.Props()
		di := deviceInfo{
			Name: p.Name, Description: p.Description, Type: p.Type.String(), Backend: d.Registry().Name(),
			DeviceID: p.DeviceID, MemoryFree: p.MemoryFree, MemoryTotal: p.MemoryTotal, Caps: p.Caps,
		}
		add := func(b ggml.BufferType, role string) {
			di.BufferTypes = append(di.BufferTypes, bufferTypeInfo{b.Name(), role, b.Alignment(), b.MaxSize(), b.IsHost()})
		}
		add(d.BufferType(), "default")
		if h, ok := d.HostBufferType(); ok {
			add(h, "host")
		}
		for _, x := range d.ExtraBufferTypes() {
			add(x, "extra")
		}
		rep.Devices = append(rep.Devices, di)
	}
	return rep
}

func devicesOptions(rf *runtimeFlags, asJSON *bool) *optionSet {
	s := newOptionSet("devices", "The backends and devices of the native set, with their memory, capabilities and buffer types.", "ggload devices [options]")
	rf.add(s)
	rf.addRPC(s)
	s.add(&option{names: []string{"--json"}, help: "print JSON", on: func(on bool) error { *asJSON = on; return nil }})
	return s
}

func runDevices(ctx context.Context, args []string, stdout io.Writer) error {
	rf := defaultRuntimeFlags()
	var asJSON bool
	s := devicesOptions(&rf, &asJSON)
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	if len(pos) > 0 {
		return s.errorf("devices takes no arguments (got %s)", strings.Join(pos, " "))
	}
	rt, err := rf.open(ctx)
	if err != nil {
		return err
	}
	rep := describeDevices(rt)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printDevices(stdout, rep)
	return nil
}

func printDevices(w io.Writer, rep devicesReport) {
	fmt.Fprintf(w, "ggml %s (%s) from %s\n", rep.Version, rep.Commit, rep.Library)
	fmt.Fprint(w, "backends:")
	for _, b := range rep.Backends {
		fmt.Fprintf(w, " %s(%d)", b.Name, len(b.Devices))
	}
	fmt.Fprintln(w)
	for _, d := range rep.Devices {
		fmt.Fprintf(w, "\n%s  %s  [%s, backend %s]\n", d.Name, d.Description, d.Type, d.Backend)
		if d.DeviceID != "" {
			fmt.Fprintf(w, "  device id  %s\n", d.DeviceID)
		}
		fmt.Fprintf(w, "  memory     %s free of %s\n", mib(d.MemoryFree), mib(d.MemoryTotal))
		c := d.Caps
		fmt.Fprintf(w, "  caps       async=%v host_buffer=%v buffer_from_host_ptr=%v events=%v mmap_support=%v\n",
			c.Async, c.HostBuffer, c.BufferFromHostPtr, c.Events, c.MmapSupport)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  buffer type\trole\talignment\tmax size\thost")
		for _, b := range d.BufferTypes {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%v\n", b.Name, b.Role, b.Alignment, mib(b.MaxSize), b.Host)
		}
		tw.Flush()
	}
	if rep.Hint != "" {
		fmt.Fprintf(w, "\n%s\n", rep.Hint)
	}
}

// mib formats bytes as llama.cpp does in its reports.
func mib(n uint64) string {
	if n >= 1<<62 {
		return "unlimited"
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}

// hiddenDevicesHint says why a Vulkan backend shows no device where ggml
// hides software drivers: the Vulkan backend lists a CPU-side device
// (lavapipe, llvmpipe) only when GGML_VK_VISIBLE_DEVICES names it. Empty
// when there is nothing to say.
func hiddenDevicesHint(rt *ggml.Runtime) string {
	if _, set := os.LookupEnv("GGML_VK_VISIBLE_DEVICES"); set {
		return ""
	}
	for _, r := range rt.Backends() {
		if r.Name() != "Vulkan" || len(r.Devices()) > 0 {
			continue
		}
		hint := "hint: the Vulkan backend shows no device; ggml hides software Vulkan devices (lavapipe) unless GGML_VK_VISIBLE_DEVICES is set"
		if icds, _ := filepath.Glob("/usr/share/vulkan/icd.d/lvp_icd.*.json"); len(icds) > 0 {
			hint += " (lavapipe is installed here: GGML_VK_VISIBLE_DEVICES=0 makes it Vulkan0)"
		}
		return hint
	}
	return ""
}
