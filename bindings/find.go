package bindings

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/ggload/ggload/native"
)

// Location is a directory holding one native set: libggml-base, the libggml
// core with the backend registry, and backend modules beside them.
type Location struct {
	Dir    string // absolute
	Base   string // path of libggml-base
	Core   string // path of libggml (core, registry, backend loader)
	Llama  string // path of libllama when the set has one (prebuilt packages do)
	Source string // how it was found: "GGLOAD_LIB_DIR", "native/lib", "user cache", "executable"
}

// FindOptions steer Find; the zero value uses the environment.
type FindOptions struct {
	// Dir, when set, is the only directory tried (as GGLOAD_LIB_DIR).
	Dir string
	// Variant picks native/lib/<platform>-<Variant> ("vulkan", "cuda", "src",
	// or "none" for the plain set). Empty means GGLOAD_VARIANT, then automatic.
	Variant string
	// Backends, for Open, names the backend modules to load (ModuleNames:
	// "cpu", "rpc", "vulkan", "cuda", ...; the CPU's is always loaded).
	// Nil loads every module of the set, as llama.cpp's tools do. A
	// program that uses the CPU alone is spared the start of a GPU
	// backend (0.1 s and more: the Vulkan loader and its drivers, CUDA's
	// initialisation). Modules load once per process: the first Open
	// decides.
	Backends []string
}

// ErrNotFound is wrapped by Find's error when no native set was found.
var ErrNotFound = errors.New("native ggml libraries not found")

// Platform returns the native/lib directory name of this GOOS/GOARCH, in the
// naming of the prebuilt packages (linux-x64, darwin-arm64, windows-x64).
func Platform() string {
	arch := runtime.GOARCH
	if arch == "amd64" {
		arch = "x64"
	}
	goos := runtime.GOOS
	if goos == "darwin" {
		return "darwin-" + arch
	}
	return goos + "-" + arch
}

// Find locates the native set. The search order:
//
//  1. opts.Dir, or GGLOAD_LIB_DIR, alone when set;
//  2. native/lib/<platform>[-variant] under the working directory, the
//     executable's directory or any of their parents (a checkout of
//     ggload, where scripts/fetch-native.sh puts them);
//  3. <user cache>/ggload/lib/<pin>/<platform>[-variant], where Install
//     (ggload fetch) and scripts/fetch-native.sh install them (<user
//     cache> is os.UserCacheDir: see CacheDir);
//  4. the executable's own directory.
//
// The variants tried, in order: opts.Variant or GGLOAD_VARIANT when set;
// otherwise CUDA where an NVIDIA driver is present, Vulkan where the
// Vulkan loader is installed, the plain set, a from-source set. The error
// lists every path tried and the command that fetches the libraries.
func Find(opts FindOptions) (Location, error) {
	var tried []string
	try := func(dir, source string) (Location, bool) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			tried = append(tried, dir+" ("+err.Error()+")")
			return Location{}, false
		}
		loc, why := inspectDir(abs)
		if why != "" {
			tried = append(tried, abs+" ("+why+")")
			return Location{}, false
		}
		loc.Source = source
		return loc, true
	}

	dir := opts.Dir
	source := "FindOptions.Dir"
	if dir == "" {
		dir, source = os.Getenv("GGLOAD_LIB_DIR"), "GGLOAD_LIB_DIR"
	}
	if dir != "" {
		if loc, ok := try(dir, source); ok {
			return loc, nil
		}
		return Location{}, fmt.Errorf("%w: %s=%s: %s", ErrNotFound, source, dir, strings.Join(tried, "; "))
	}

	variant := opts.Variant
	if variant == "" {
		variant = os.Getenv("GGLOAD_VARIANT")
	}
	platform := Platform()
	var names []string
	switch variant {
	case "":
		names = autoVariants(platform)
	case "none":
		names = []string{platform}
	default:
		names = []string{platform + "-" + variant}
	}

	exeDir := ""
	if exe, err := os.Executable(); err == nil {
		exeDir = filepath.Dir(exe)
	}
	for _, root := range libRoots(exeDir) {
		for _, name := range names {
			if loc, ok := try(filepath.Join(root, name), "native/lib"); ok {
				return loc, nil
			}
		}
	}
	if cache, err := cacheLibDir(); err == nil {
		for _, name := range names {
			if loc, ok := try(filepath.Join(cache, name), "user cache"); ok {
				return loc, nil
			}
		}
	}
	if exeDir != "" {
		if loc, ok := try(exeDir, "executable"); ok {
			return loc, nil
		}
	}
	return Location{}, fmt.Errorf("%w; searched:\n  %s\nfetch them with: %s, or in a checkout scripts/fetch-native.sh %s (Vulkan: linux-x64-vulkan; RPC: scripts/build-native.sh linux-x64 cpu,rpc --into <set>), or set GGLOAD_LIB_DIR to a llama.cpp build's library directory",
		ErrNotFound, strings.Join(tried, "\n  "), FetchCommand(), platform)
}

// SearchOrder describes, in Find's order, where the native libraries are
// looked for (the user cache's directory included, as this system names it).
func SearchOrder() []string {
	cache := "the user cache"
	if d, err := cacheLibDir(); err == nil {
		cache = d + "/<set>"
	}
	return []string{
		"GGLOAD_LIB_DIR (alone, when set)",
		"native/lib/<platform>[-variant] of a checkout (the working directory's, the executable's, or a parent's)",
		cache + " (where the scripts install every set)",
		"beside the executable",
	}
}

// CacheDir is ggload's cache directory: GGLOAD_CACHE when set, else
// ggload under os.UserCacheDir (the scripts use the same).
func CacheDir() (string, error) {
	if d := os.Getenv("GGLOAD_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "ggload"), nil
}

// cacheLibDir is where the user cache holds the pinned sets, one
// directory each: <CacheDir>/lib/<llama.cpp tag>. Find looks there, and
// Install and the scripts install there.
func cacheLibDir() (string, error) {
	d, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "lib", native.Load().LlamaCppTag), nil
}

// autoVariants orders the sets to try: CUDA where an NVIDIA driver is
// present, Vulkan where the loader is installed, then the plain set, then a
// from-source set.
func autoVariants(platform string) []string {
	var out []string
	if _, err := os.Stat("/proc/driver/nvidia/version"); err == nil {
		out = append(out, platform+"-cuda")
	}
	if haveVulkanLoader() {
		out = append(out, platform+"-vulkan")
	}
	out = append(out, platform, platform+"-src")
	return out
}

func haveVulkanLoader() bool {
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"} {
		if _, err := os.Stat(filepath.Join(dir, "libvulkan.so.1")); err == nil {
			return true
		}
	}
	return runtime.GOOS == "darwin" || runtime.GOOS == "windows"
}

// libRoots returns every native/lib directory above the working directory and
// the executable, nearest first, without duplicates.
func libRoots(exeDir string) []string {
	var roots []string
	seen := map[string]bool{}
	walk := func(start string) {
		for d := start; d != ""; {
			root := filepath.Join(d, "native", "lib")
			if !seen[root] {
				seen[root] = true
				if st, err := os.Stat(root); err == nil && st.IsDir() {
					roots = append(roots, root)
				}
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	if wd, err := os.Getwd(); err == nil {
		walk(wd)
	}
	if exeDir != "" {
		walk(exeDir)
	}
	return roots
}

// inspectDir returns the set in dir, or why dir does not hold one.
func inspectDir(dir string) (Location, string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return Location{}, "no such directory"
		}
		return Location{}, err.Error()
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	pick := func(exact []string, prefix, suffix string, exclude string) string {
		for _, n := range exact {
			for _, have := range names {
				if have == n {
					return filepath.Join(dir, n)
				}
			}
		}
		for _, n := range names {
			if strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) && (exclude == "" || !strings.HasPrefix(n, exclude)) {
				return filepath.Join(dir, n)
			}
		}
		return ""
	}
	var loc Location
	loc.Dir = dir
	switch runtime.GOOS {
	case "darwin":
		loc.Base = pick([]string{"libggml-base.dylib", "libggml-base.0.dylib"}, "", "\x00", "")
		loc.Core = pick([]string{"libggml.dylib", "libggml.0.dylib"}, "libggml.", ".dylib", "")
		loc.Llama = pick([]string{"libllama.dylib", "libllama.0.dylib"}, "libllama.", ".dylib", "")
	case "windows":
		loc.Base = pick([]string{"ggml-base.dll"}, "", "\x00", "")
		loc.Core = pick([]string{"ggml.dll"}, "", "\x00", "")
		loc.Llama = pick([]string{"llama.dll"}, "", "\x00", "")
	default:
		loc.Base = pick([]string{"libggml-base.so", "libggml-base.so.0"}, "", "\x00", "")
		loc.Core = pick([]string{"libggml.so.0", "libggml.so"}, "libggml.", ".so", "")
		loc.Llama = pick([]string{"libllama.so.0", "libllama.so"}, "libllama.", ".so", "libllama-")
	}
	switch {
	case loc.Base == "" && loc.Core == "":
		return Location{}, "no libggml-base or libggml"
	case loc.Base == "":
		return Location{}, "no libggml-base"
	case loc.Core == "":
		return Location{}, "no libggml core library"
	}
	return loc, ""
}
