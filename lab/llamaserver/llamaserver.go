// Package llamaserver builds llama-server of the pin from its source
// (tools/server, with the libmtmd sources, cpp-httplib, the vendored
// hashes and the web UI's generated asset table, empty) against the
// native set's prebuilt libllama and libllama-common, and starts it on a
// free loopback port for tests and benchmarks that hold ggload's serving
// engine and HTTP layer to llama-server itself.
//
// The build is cached in the user cache: each object by its source and
// flags, the program by its objects and the native set. A fresh build
// compiles about eighty files on every core (see Build).
package llamaserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/lab/testenv"
)

// unit is one source file and how it is compiled.
type unit struct {
	src  string // relative to the source tree, or absolute (the generated UI table)
	c    bool   // compiled as C
	opt  string
	incl []string // extra include directories, relative to the source tree
}

// sources lists the program's compilation units, read from the pin's
// CMake files: tools/server's server-context and llama-server-impl
// libraries and main.cpp, tools/mtmd's mtmd library, cpp-httplib, and
// vendor/hash. The server's own files and cpp-httplib are optimized
// (-O1: the per-request and per-token code runs there; -O2 takes half as
// long again to compile server-context.cpp for little); libmtmd's run
// only with a projector and are compiled without optimization.
func sources(src string) ([]unit, error) {
	read := func(rel string) (string, error) {
		b, err := os.ReadFile(filepath.Join(src, rel))
		return string(b), err
	}
	lib := func(cm, name string) ([]string, error) {
		m := regexp.MustCompile(`(?s)add_library\(` + regexp.QuoteMeta(name) + `\s(.*?)\)`).FindStringSubmatch(cm)
		if m == nil {
			return nil, fmt.Errorf("llamaserver: no %s library in the pin's CMake files", name)
		}
		var out []string
		for _, f := range strings.Fields(m[1]) {
			if strings.HasSuffix(f, ".cpp") || strings.HasSuffix(f, ".c") {
				out = append(out, f)
			}
		}
		return out, nil
	}
	var units []unit
	server, err := read("tools/server/CMakeLists.txt")
	if err != nil {
		return nil, err
	}
	// the two libraries are both named ${TARGET} in the file: take every
	// add_library's sources
	for _, m := range regexp.MustCompile(`(?s)add_library\(\$\{TARGET\}(?:\s+STATIC)?\s(.*?)\)`).FindAllStringSubmatch(server, -1) {
		for _, f := range strings.Fields(m[1]) {
			if strings.HasSuffix(f, ".cpp") {
				units = append(units, unit{src: "tools/server/" + f, opt: "-O1"})
			}
		}
	}
	if len(units) == 0 {
		return nil, errors.New("llamaserver: no sources in tools/server/CMakeLists.txt")
	}
	units = append(units, unit{src: "tools/server/main.cpp", opt: "-O1"})
	mtmd, err := read("tools/mtmd/CMakeLists.txt")
	if err != nil {
		return nil, err
	}
	fs, err := lib(mtmd, "mtmd")
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		units = append(units, unit{src: "tools/mtmd/" + f, opt: "-O0"})
	}
	units = append(units, unit{src: "vendor/cpp-httplib/httplib.cpp", opt: "-O1"})
	hash, err := read("vendor/hash/CMakeLists.txt")
	if err != nil {
		return nil, err
	}
	units = append(units, unit{src: "vendor/hash/hash.cpp", opt: "-O1"})
	if m := regexp.MustCompile(`(?s)set\(VENDOR_SRCS\s(.*?)\)`).FindStringSubmatch(hash); m != nil {
		for _, f := range strings.Fields(m[1]) {
			// (the pin compiles sha1.c as C++: set_source_files_properties)
			units = append(units, unit{src: "vendor/hash/" + f, c: !strings.Contains(f, "sha1"), opt: "-O1", incl: []string{"vendor/hash"}})
		}
	}
	return units, nil
}

// defines are the compile definitions the pin's build gives these
// sources (and that the prebuilt libllama-common was built with:
// LLAMA_SUBPROCESS changes common_subproc's layout).
var defines = []string{
	"-DLLAMA_SHARED", "-DLLAMA_SUBPROCESS", "-DMTMD_VIDEO",
	"-DCPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH=1048576", "-DCPPHTTPLIB_LISTEN_BACKLOG=512",
	"-DCPPHTTPLIB_REQUEST_URI_MAX_LENGTH=32768", "-DCPPHTTPLIB_TCP_NODELAY=1",
}

var buildMu sync.Mutex

// Build compiles llama-server (once per pin and native set; objects are
// kept across builds) and returns its path. A missing compiler,
// libllama-common or source tree skips the test with what to install,
// or fails it where GGLOAD_REQUIRE names "llama".
func Build(t testing.TB) string {
	t.Helper()
	rt := testenv.Runtime(t)
	src := testenv.SourceTree(t)
	loc := rt.Location()
	if loc.Llama == "" {
		testenv.Missing(t, "llama", "the native set %s has no libllama (scripts/fetch-native.sh)", loc.Dir)
	}
	common := filepath.Join(loc.Dir, "libllama-common.so")
	if _, err := os.Stat(common); err != nil {
		testenv.Missing(t, "llama", "the native set %s has no libllama-common.so (scripts/fetch-native.sh)", loc.Dir)
	}
	for _, tool := range []string{"g++", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "llama", "no %s to build llama-server (apt-get install g++)", tool)
		}
	}
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := build(src, loc.Dir, common, loc.Llama, loc.Core, loc.Base, filepath.Join(cache, "llama-server"))
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// build compiles what is not in dir yet and links the program.
func build(src, libDir, common, llama, core, base, dir string) (string, error) {
	units, err := sources(src)
	if err != nil {
		return "", err
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	gen := filepath.Join(dir, "ui")
	if err := writeUI(src, gen); err != nil {
		return "", err
	}
	units = append(units, unit{src: filepath.Join(gen, "ui.cpp"), opt: "-O0"})
	h := sha256.New()
	objs := make([]string, len(units))
	for i, u := range units {
		key, err := u.key(src, gen)
		if err != nil {
			return "", err
		}
		objs[i] = filepath.Join(dir, "obj", key+".o")
		io.WriteString(h, key)
	}
	libs := []string{common, llama, core, base}
	for _, l := range libs {
		fi, err := os.Stat(l)
		if err != nil {
			return "", err
		}
		fmt.Fprint(h, l, fi.ModTime().UnixNano(), fi.Size())
	}
	bin := filepath.Join(dir, "bin-"+hex.EncodeToString(h.Sum(nil))[:16], "llama-server")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	unlock, err := lockFile(bin + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "obj"), 0o755); err != nil {
		return "", err
	}
	if err := compileAll(src, gen, units, objs); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	args := append([]string{"-o", tmp}, objs...)
	args = append(args, libs...)
	args = append(args, "-Wl,-rpath,"+libDir, "-lpthread")
	if out, err := exec.Command("g++", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("llamaserver: linking: %v\n%s", err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// key names a unit's object: its source, flags and compiler.
func (u unit) key(src, gen string) (string, error) {
	path := u.path(src)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, u.src, u.c, u.opt, u.incl, defines, compilerVersion(), src)
	h.Write(b)
	name := strings.NewReplacer("/", "_", ".", "_").Replace(filepath.Base(u.src))
	return name + "-" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

func (u unit) path(src string) string {
	if filepath.IsAbs(u.src) {
		return u.src
	}
	return filepath.Join(src, u.src)
}

var compilerVersion = sync.OnceValue(func() string {
	out, _ := exec.Command("g++", "--version").Output()
	return strings.SplitN(string(out), "\n", 2)[0]
})

// compileAll compiles the units whose objects are missing, one job per
// core.
func compileAll(src, gen string, units []unit, objs []string) error {
	jobs := make(chan int)
	errs := make([]error, len(units))
	var wg sync.WaitGroup
	for range max(runtime.NumCPU(), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				errs[i] = compile(src, gen, units[i], objs[i])
			}
		}()
	}
	for i := range units {
		if _, err := os.Stat(objs[i]); err == nil {
			continue
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return errors.Join(errs...)
}

func compile(src, gen string, u unit, obj string) error {
	cc, args := "g++", []string{"-std=c++17"}
	if u.c {
		cc, args = "gcc", nil
	} else if strings.HasSuffix(u.src, ".c") {
		args = append([]string{"-x", "c++"}, args...)
	}
	args = append(args, u.opt, "-w", "-fPIC")
	for _, inc := range append([]string{"include", "common", "ggml/include", "vendor", "tools/mtmd", "tools/server", "."}, u.incl...) {
		args = append(args, "-I", filepath.Join(src, inc))
	}
	args = append(args, "-I", gen)
	args = append(args, defines...)
	tmp := fmt.Sprintf("%s.tmp%d", obj, os.Getpid())
	args = append(args, "-c", u.path(src), "-o", tmp)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("llamaserver: compiling %s: %v\n%s", u.src, err, out)
	}
	return os.Rename(tmp, obj)
}

// writeUI writes the web UI's ui.h and ui.cpp as the pin's
// scripts/ui-assets.cmake generates them from tools/ui's templates when
// no UI assets are built or downloaded: an empty asset table.
func writeUI(src, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"ui.h", "ui.cpp"} {
		b, err := os.ReadFile(filepath.Join(src, "tools", "ui", name+".in"))
		if err != nil {
			return err
		}
		s := string(b)
		s = strings.ReplaceAll(s, "#cmakedefine LLAMA_UI_HAS_ASSETS 1", "/* #undef LLAMA_UI_HAS_ASSETS */")
		s = strings.NewReplacer("@N_ASSETS@", "0", "@ASSET_ARRAYS@", "", "@ASSET_TABLE@", "", "@USE_GZIP@", "false").Replace(s)
		if strings.Contains(s, "@") && regexp.MustCompile(`@[A-Z_]+@`).MatchString(s) {
			return fmt.Errorf("llamaserver: tools/ui/%s.in has a placeholder this build does not fill", name)
		}
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && string(old) == s {
			continue
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// lockFile takes a lock file that other test processes wait on; one
// left by a process that died building is taken over after 30 minutes.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if fi, err := os.Stat(path); err == nil && time.Since(fi.ModTime()) > 30*time.Minute {
			os.Remove(path)
			continue
		}
		if _, err := os.Stat(strings.TrimSuffix(path, ".lock")); err == nil {
			return func() {}, nil
		}
		time.Sleep(time.Second)
	}
}

// Server is a running llama-server.
type Server struct {
	URL  string // http://127.0.0.1:PORT
	Port int
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
	err  error
}

// Start runs bin (Build's program) with the flags on a free loopback
// port, from the native set's directory (ggml finds its backends there),
// and waits until /health answers 200 (the model loaded); the server is
// stopped when the test ends. Its log is in the test's failure message.
func Start(t testing.TB, bin string, flags ...string) *Server {
	t.Helper()
	s, err := StartServer(testenv.Runtime(t).Location().Dir, bin, 5*time.Minute, flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			t.Logf("llama-server's log:\n%s", s.Log())
		}
	})
	return s
}

// StartServer is Start without a test: libDir is the native set's
// directory; wait bounds the load.
func StartServer(libDir, bin string, wait time.Duration, flags ...string) (*Server, error) {
	for _, f := range flags {
		if f == "--host" || f == "--port" {
			return nil, fmt.Errorf("llamaserver: %s is the helper's own flag", f)
		}
	}
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--host", "127.0.0.1", "--port", fmt.Sprint(port)}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = libDir
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+libDir)
	if _, ok := os.LookupEnv("GGML_VK_VISIBLE_DEVICES"); !ok {
		cmd.Env = append(cmd.Env, "GGML_VK_VISIBLE_DEVICES=0")
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Port: port, cmd: cmd, log: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("llamaserver: %w", err)
	}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.waitHealthy(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("llamaserver: %s %s: %w\n%s", bin, strings.Join(flags, " "), err, s.Log())
	}
	return s, nil
}

func (s *Server) waitHealthy(ctx context.Context) error {
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		select {
		case <-s.done:
			return fmt.Errorf("exited: %v", s.err)
		case <-ctx.Done():
			return fmt.Errorf("no healthy answer: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := client.Get(s.URL + "/health")
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
}

// Log is what the server has printed so far.
func (s *Server) Log() string { return s.log.String() }

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Close stops the server (SIGTERM, then SIGKILL after 10 s) and waits
// for it.
func (s *Server) Close() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
