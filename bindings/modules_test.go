package bindings

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestModuleOf(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the module names here are of the Unix sets")
	}
	for file, want := range map[string]string{
		"libggml-cpu-haswell.so":   "cpu",
		"libggml-cpu.so":           "cpu",
		"libggml-rpc.so":           "rpc",
		"libggml-vulkan.so":        "vulkan",
		"libggml-cuda.so":          "cuda",
		"libggml-base.so":          "",
		"libggml-base.so.0":        "",
		"libggml.vulkan.v0.5.0.so": "",
		"libggml.so":               "",
		"libllama-common.so":       "",
		"libggml-cpu-x64.so.0":     "",
		"ggml-rpc-server":          "",
		"libggml-nothing.so":       "",
	} {
		if got := moduleOf(file); got != want {
			t.Errorf("%s: module %q, want %q", file, got, want)
		}
	}
}

func TestCheckBackends(t *testing.T) {
	if got, err := checkBackends(nil); got != nil || err != nil {
		t.Errorf("nil: %v, %v; want every module", got, err)
	}
	got, err := checkBackends([]string{"vulkan", "rpc"})
	if err != nil || !slices.Equal(got, []string{"rpc", "vulkan", "cpu"}) {
		t.Errorf("vulkan, rpc: %v, %v; want rpc, vulkan, cpu (ggml's order, the CPU's added)", got, err)
	}
	if _, err := checkBackends([]string{"cpu", "Vulkan0"}); err == nil || !strings.Contains(err.Error(), `"Vulkan0"`) || !strings.Contains(err.Error(), "vulkan") {
		t.Errorf("a device name for a module: %v", err)
	}
}

// A process that opens the set with some modules registers those alone,
// maps no other module, and refuses a later Open that asks for one left
// out; another module's devices are what it is spared.
func TestOpenSomeModules(t *testing.T) {
	if os.Getenv("GGLOAD_TEST_MODULES_CHILD") == "1" {
		l, err := Open(FindOptions{Backends: []string{"cpu"}})
		if err != nil {
			os.Stdout.WriteString("OPEN " + err.Error() + "\n")
			os.Exit(1)
		}
		var names []string
		for i := uintptr(0); i < l.RegCount(); i++ {
			names = append(names, l.RegName(l.RegGet(i)))
		}
		os.Stdout.WriteString("REGS " + strings.Join(names, ",") + "\n")
		maps, _ := os.ReadFile("/proc/self/maps")
		for _, m := range ModuleNames() {
			if m != "cpu" && strings.Contains(string(maps), "libggml-"+m+".so") {
				os.Stdout.WriteString("MAPPED " + m + "\n")
			}
		}
		if _, err := Open(FindOptions{Backends: []string{"cpu"}}); err != nil {
			os.Stdout.WriteString("AGAIN " + err.Error() + "\n")
		}
		for _, want := range [][]string{nil, {"vulkan"}} {
			if _, err := Open(FindOptions{Backends: want}); err != nil {
				os.Stdout.WriteString("REFUSED " + err.Error() + "\n")
			}
		}
		os.Exit(0)
	}
	if runtime.GOOS == "windows" {
		t.Skip("on Windows every module is loaded (a DLL's dependencies are not looked for beside a link to it)")
	}
	l := openOrSkip(t)
	var all []string
	for i := uintptr(0); i < l.RegCount(); i++ {
		all = append(all, l.RegName(l.RegGet(i)))
	}
	if len(all) < 2 {
		t.Skipf("the set at %s holds the CPU's module alone (%v): nothing to leave out", l.Loc.Dir, l.Loc.Modules())
	}
	if mods := l.Loc.Modules(); len(mods) < 2 || mods[len(mods)-1] != "cpu" {
		t.Errorf("the set's modules %v (registered: %v): want the CPU's last, after others", mods, all)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenSomeModules$")
	cmd.Env = append(os.Environ(), "GGLOAD_TEST_MODULES_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "REGS CPU\n") {
		t.Errorf("the child registered other backends than the CPU's (every one: %v):\n%s", all, s)
	}
	if strings.Contains(s, "MAPPED") || strings.Contains(s, "AGAIN") {
		t.Errorf("another module is mapped, or the same Open again is refused:\n%s", s)
	}
	if strings.Count(s, "REFUSED bindings: this process loaded the backend modules cpu alone") != 2 || !strings.Contains(s, "cannot load vulkan after them") {
		t.Errorf("a later Open that asks for every module, or for vulkan's, is not refused so:\n%s", s)
	}
}
