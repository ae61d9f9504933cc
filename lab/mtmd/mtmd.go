// Package mtmd holds ggload's multimodal projector placement to the pinned
// llama.cpp's libmtmd: a small program (testdata/oracle.cpp) built from the pin's
// tools/mtmd sources loads a projector file as mtmd_init_from_file does and
// reports each tensor's buffer type and device, each weight buffer, and the
// memory clip counts per device (mtmd_get_memory_usage).
package mtmd

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

// Sources lists the pin's libmtmd sources the oracle is compiled from,
// read from tools/mtmd/CMakeLists.txt's mtmd library (clip.cpp is included
// by oracle.cpp itself, the helpers are left out: they decode media).
func Sources(src string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(src, "tools", "mtmd", "CMakeLists.txt"))
	if err != nil {
		return nil, err
	}
	lib := regexp.MustCompile(`(?s)add_library\(mtmd\s(.*?)\)`).FindSubmatch(b)
	if lib == nil {
		return nil, fmt.Errorf("mtmd: no mtmd library in %s", filepath.Join(src, "tools", "mtmd", "CMakeLists.txt"))
	}
	var out []string
	for _, f := range strings.Fields(string(lib[1])) {
		if !strings.HasSuffix(f, ".cpp") || f == "clip.cpp" || strings.HasPrefix(f, "mtmd-helper") {
			continue
		}
		out = append(out, filepath.Join("tools", "mtmd", f))
	}
	return out, nil
}

// Build compiles the oracle (once per pin and native set: lab/cxx caches
// it) and returns its path.
func Build(t testing.TB) string {
	t.Helper()
	src := testenv.SourceTree(t)
	srcs, err := Sources(src)
	if err != nil {
		t.Fatal(err)
	}
	_, here, _, _ := runtime.Caller(0)
	prog := filepath.Join(filepath.Dir(here), "testdata", "oracle.cpp")
	// clip calls the backend registry, which lives in libggml; -O0: the
	// oracle loads, it computes nothing, and it compiles sooner
	core := testenv.Runtime(t).Location().Core
	return cxx.Build(t, "mmproj-oracle", append([]string{prog}, srcs...), "-O0", "-DLLAMA_SHARED", "-w", "-Wl,--no-as-needed", core)
}

// Tensor is where clip put one tensor.
type Tensor struct {
	Modality, Name, BufferType, Device string
	Size                               int64
}

// Buffer is one weight buffer clip allocated.
type Buffer struct {
	Modality, Name, BufferType, Device string
	Size                               int64
}

// Context is one of clip's contexts (vision, audio, gen_audio).
type Context struct {
	Modality, Projector, Backend string
	// Weights and Compute are the bytes clip counts per device name:
	// the tensors' sizes, and the warm-up's compute buffers.
	Weights, Compute map[string]int64
	// Embd is clip_n_mmproj_embd, -1 where it was not reached.
	Embd int
}

// Report is what the oracle printed for one load.
type Report struct {
	Err      string // clip's error, "" when the file loaded
	Contexts []*Context
	Tensors  []Tensor
	Buffers  []Buffer
	// Missing are the tensor names clip looked up and did not find, in
	// the order asked (the optional ones included).
	Missing []string
	// Crashed is set when the program died before the report ended (a
	// failed assertion in clip); Output then holds its last words.
	Crashed bool
	Output  string
}

// Context returns the report's context of a modality, or nil.
func (r *Report) Context(modality string) *Context {
	for _, c := range r.Contexts {
		if c.Modality == modality {
			return c
		}
	}
	return nil
}

// Load says how a projector is loaded: mtmd_context_params' use_gpu and
// device (a device name, "" for none) and whether clip warms up.
type Load struct {
	UseGPU bool
	Device string
	Warmup bool
	// ImageMinTokens and ImageMaxTokens are mtmd_context_params' (0: the
	// model's own); the memory mode alone takes them.
	ImageMinTokens, ImageMaxTokens int
}

// Oracle is a running oracle that answers one load at a time.
type Oracle struct {
	t   testing.TB
	bin string
	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	err *strings.Builder
}

// Start builds the oracle and returns it; it stops with the test.
func Start(t testing.TB) *Oracle {
	t.Helper()
	o := &Oracle{t: t, bin: Build(t)}
	t.Cleanup(o.stop)
	return o
}

func (o *Oracle) stop() {
	if o.cmd == nil {
		return
	}
	o.in.Close()
	o.cmd.Wait()
	o.cmd = nil
}

func (o *Oracle) start() error {
	cmd := cxx.Command(o.t, o.bin, "serve")
	cmd.Env = append(cmd.Env, "GGML_NO_BACKTRACE=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	o.err = &strings.Builder{}
	cmd.Stderr = o.err
	if err := cmd.Start(); err != nil {
		return err
	}
	o.cmd, o.in, o.out = cmd, in, bufio.NewReader(out)
	return nil
}

// Load loads the projector at path as l says and returns the report.
// A crash of clip is a report too (Crashed), and the next call starts
// the program again.
func (o *Oracle) Load(path string, l Load) (*Report, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		if err := o.start(); err != nil {
			return nil, err
		}
	}
	dev := l.Device
	if dev == "" {
		dev = "-"
	}
	if _, err := fmt.Fprintf(o.in, "%d %s %d %s\n", b2i(l.UseGPU), dev, b2i(l.Warmup), path); err != nil {
		o.stop()
		return nil, err
	}
	r := &Report{}
	for {
		line, err := o.out.ReadString('\n')
		if err != nil {
			r.Crashed = true
			o.in.Close()
			o.cmd.Wait()
			o.cmd = nil
			r.Output = lastWords(o.err.String())
			return r, nil
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "END" {
			return r, nil
		}
		if err := r.parse(line); err != nil {
			return nil, err
		}
	}
}

// Memory is mtmd_get_memory_usage's answer for the projector at path,
// by device name, from a fresh process (its warm-up may abort).
func (o *Oracle) Memory(path string, l Load) (map[string]int64, error) {
	dev := l.Device
	if dev == "" {
		dev = "-"
	}
	tokens := func(n int) string {
		if n <= 0 {
			return "-1"
		}
		return strconv.Itoa(n)
	}
	cmd := cxx.Command(o.t, o.bin, "memory", strconv.Itoa(b2i(l.UseGPU)), dev, tokens(l.ImageMinTokens), tokens(l.ImageMaxTokens), path)
	cmd.Env = append(cmd.Env, "GGML_NO_BACKTRACE=1")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("mmproj-oracle memory %s: %v", path, err)
	}
	mem := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		switch {
		case len(f) == 2 && f[0] == "ERR":
			return nil, fmt.Errorf("mtmd_get_memory_usage %s: %s", path, f[1])
		case len(f) == 3 && f[0] == "M":
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				return nil, err
			}
			mem[f[1]] += n
		}
	}
	return mem, nil
}

func (r *Report) parse(line string) error {
	f := strings.Split(line, "\t")
	num := func(s string) int64 {
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	switch {
	case f[0] == "A" && len(f) == 3:
		if f[2] == "0" && !slices.Contains(r.Missing, f[1]) {
			r.Missing = append(r.Missing, f[1])
		}
	case f[0] == "ERR" && len(f) == 2:
		r.Err = f[1]
	case f[0] == "CTX" && len(f) == 4:
		r.Contexts = append(r.Contexts, &Context{Modality: f[1], Projector: f[2], Backend: f[3],
			Weights: map[string]int64{}, Compute: map[string]int64{}, Embd: -1})
	case f[0] == "T" && len(f) == 6:
		r.Tensors = append(r.Tensors, Tensor{f[1], f[2], f[3], f[4], num(f[5])})
	case f[0] == "B" && len(f) == 6:
		r.Buffers = append(r.Buffers, Buffer{f[1], f[2], f[3], f[4], num(f[5])})
	case (f[0] == "W" || f[0] == "C") && len(f) == 4:
		c := r.Context(f[1])
		if c == nil {
			return fmt.Errorf("mmproj-oracle: %q before its context", line)
		}
		if f[0] == "W" {
			c.Weights[f[2]] += num(f[3])
		} else {
			c.Compute[f[2]] += num(f[3])
		}
	case f[0] == "E" && len(f) == 3:
		if c := r.Context(f[1]); c != nil {
			c.Embd = int(num(f[2]))
		}
	default:
		return fmt.Errorf("mmproj-oracle: unexpected line %q", line)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lastWords is the failed assertion of a crash's output, or its last line.
func lastWords(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for _, l := range lines {
		if strings.Contains(l, "GGML_ASSERT") || strings.Contains(l, "GGML_ABORT") || strings.Contains(l, "fatal error") {
			return l
		}
	}
	return lines[len(lines)-1]
}

// Judge is the oracle as a projector synthesizer's judge: clip's answer
// to loading the file at path, offloading nothing.
func (o *Oracle) Judge(path string) (synth.ProjectorAnswer, error) {
	r, err := o.Load(path, Load{})
	if err != nil {
		return synth.ProjectorAnswer{}, err
	}
	if r.Crashed {
		return synth.ProjectorAnswer{Err: r.Output, Crashed: true, Missing: r.Missing}, nil
	}
	return synth.ProjectorAnswer{Err: r.Err, Missing: r.Missing}, nil
}
