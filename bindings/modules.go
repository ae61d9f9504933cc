// Port of llama.cpp ggml/src/ggml-backend-reg.cpp (v0.5.0): the backend
// modules' names and load order.

package bindings

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// moduleNames are the backend modules ggml_backend_load_all_from_path
// looks for in a directory, in the order it loads them (the pin's
// ggml-backend-reg.cpp): ggml numbers the devices in that order.
var moduleNames = []string{"blas", "zendnn", "cann", "cuda", "hip", "metal", "rpc", "sycl", "vulkan", "virtgpu", "opencl", "hexagon", "musa", "openvino", "cpu"}

// ModuleNames are the names of the backend modules a native set may hold
// (FindOptions.Backends), in the order ggml loads them.
func ModuleNames() []string { return slices.Clone(moduleNames) }

// moduleOf is the backend module a file of a native set belongs to
// ([lib]ggml-NAME.so, or a variant: [lib]ggml-NAME-VARIANT.so, as ggml
// looks for them), "" for any other file.
func moduleOf(file string) string {
	prefix, ext := "libggml-", ".so"
	if runtime.GOOS == "windows" {
		prefix, ext = "ggml-", ".dll"
	}
	rest, ok := strings.CutPrefix(file, prefix)
	if !ok || !strings.HasSuffix(rest, ext) {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimSuffix(rest, ext), "-")
	if slices.Contains(moduleNames, name) {
		return name
	}
	return ""
}

// checkBackends validates FindOptions.Backends: nil (every module), or
// known module names, the CPU's added where missing, in ggml's order.
func checkBackends(want []string) ([]string, error) {
	if want == nil {
		return nil, nil
	}
	out := []string{"cpu"}
	for _, w := range want {
		if !slices.Contains(moduleNames, w) {
			return nil, fmt.Errorf("bindings: no backend module is called %q: want %s", w, strings.Join(moduleNames, ", "))
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	sortModules(out)
	return out, nil
}

// loadModules loads the backend modules of dir, as llama.cpp does
// (ggml_backend_load_all_from_path, which also picks the best of a
// module's variants, as the CPU's), or only those of want. ggml offers no
// way to load some of a directory's modules with that choice, so it is
// pointed at a directory of links to the set's files, the other modules
// left out. It returns the modules it was limited to: nil where it loaded
// every one (want nil, or links cannot be made here).
func (l *Lib) loadModules(dir string, want []string) []string {
	if want == nil || runtime.GOOS == "windows" {
		// (a DLL's dependencies are not looked for beside a link to it)
		l.LoadAllFromPath(dir)
		return nil
	}
	tmp, err := os.MkdirTemp("", "ggload-modules-")
	if err == nil {
		defer os.RemoveAll(tmp)
		err = linkSet(dir, tmp, want)
	}
	if err != nil {
		l.LoadAllFromPath(dir)
		return nil
	}
	l.LoadAllFromPath(tmp)
	return want
}

// linkSet links into tmp every file of dir but the backend modules not in
// want.
func linkSet(dir, tmp string, want []string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if m := moduleOf(e.Name()); m != "" && !slices.Contains(want, m) {
			continue
		}
		if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(tmp, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// covers checks that the modules loaded serve a later Open that asks for
// want (nil: every one).
func (l *Lib) covers(want []string) error {
	if l.modules == nil {
		return nil
	}
	var missing []string
	if want == nil {
		missing = []string{"every other"}
	}
	for _, w := range want {
		if !slices.Contains(l.modules, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("bindings: this process loaded the backend modules %s alone (its first Open's Backends), and cannot load %s after them: ggml numbers devices in the order it loads modules; open with them from the first", strings.Join(l.modules, ", "), strings.Join(missing, ", "))
}

// Modules are the backend modules the set's directory holds, in ggml's
// order (by their files' names; none is loaded to tell).
func (loc Location) Modules() []string {
	entries, err := os.ReadDir(loc.Dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if m := moduleOf(e.Name()); m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	sortModules(out)
	return out
}

// sortModules puts module names in the order ggml loads them.
func sortModules(m []string) {
	slices.SortFunc(m, func(a, b string) int { return slices.Index(moduleNames, a) - slices.Index(moduleNames, b) })
}
