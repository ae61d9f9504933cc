package httpsrc_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// ignoreRanges makes a fileServer serve every request whole, as servers
// without range support do: the Range header is dropped before
// http.ServeContent sees it.
func ignoreRanges(fs *fileServer, also func(r *http.Request)) {
	fs.fault = func(_ int64, w http.ResponseWriter, r *http.Request) bool {
		if also != nil {
			also(r)
		}
		r.Header.Del("Range")
		return false
	}
}

// reversed writes the model at path again with its tensors in the
// opposite order in the file: the order of the file's bytes is then not
// the loader's own order of the weights.
func reversed(t *testing.T, path string) string {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for i := len(f.Tensors) - 1; i >= 0; i-- {
		ti := f.Tensors[i]
		data := make([]byte, ti.Size)
		if _, err := f.Data(ti).ReadAt(data, 0); err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensorBytes(ti.Name, ti.Type, ti.Shape[:max(ti.NDims, 1)], data); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "reversed.gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A server that ignores ranges: OpenModel reads the header from the start
// of its body and closes it; a plan works from that alone; a load reads
// the body once more, in file order (here not the loader's order of the
// weights), whatever the loader's readers, and the tensors are the file's.
// Reading back behind the stream is refused.
func TestServerWithoutRanges(t *testing.T) {
	rt := testenv.Runtime(t)
	path := reversed(t, testenv.ModelFile(t, rt, spec))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	local := testenv.OpenModel(t, path)
	goroutines := runtime.NumGoroutine()
	fs := &fileServer{data: data, etag: `"v1"`}
	ignoreRanges(fs, nil)
	srv, open := served(t, fs, false)
	const window = 4096 // less than the header: the parse reads on in the stream
	gm, err := httpsrc.OpenModel(context.Background(), srv.URL+"/model.gguf", httpsrc.Options{HeaderWindow: window})
	if err != nil {
		t.Fatal(err)
	}
	src := gm.Files[0].Source()
	r := src.Reader.(*httpsrc.Reader)
	if !src.Sequential || !r.Sequential() {
		t.Fatalf("the source of a server without ranges is not sequential")
	}
	header := r.Received()
	if r.Requests() != 1 || header >= int64(len(data)) {
		t.Fatalf("the header took %d requests and %d of the file's %d bytes", r.Requests(), header, len(data))
	}
	if n := settle(open.Load, 0); n != 0 {
		t.Fatalf("the header's stream was left open (%d connections)", n)
	}
	if _, err := place.New(context.Background(), rt, gm, place.Params{DeviceNames: []string{"none"}, NoExtraBufts: true}); err != nil {
		t.Fatal(err)
	}
	if err := loadAndCompare(t, rt, gm, local, loader.Options{Readers: 4}); err != nil {
		t.Fatal(err)
	}
	// one more pass of the body, no further than the file
	if r.Requests() != 2 || r.Received() > header+int64(len(data)) {
		t.Fatalf("the load took %d requests and %d bytes for a file of %d (the header %d)", r.Requests()-1, r.Received()-header, len(data), header)
	}
	t.Logf("header: %d bytes in 1 request; load: %d bytes in 1 request, of a file of %d", header, r.Received()-header, len(data))
	_, err = r.ReadAt(make([]byte, 16), int64(len(data)/2)) // past the header, behind the stream
	var he *httpsrc.Error
	if !errors.Is(err, httpsrc.ErrNoRanges) || !errors.As(err, &he) || !regexp.MustCompile(`-mu`).MatchString(err.Error()) {
		t.Fatalf("a read behind the stream: %v", err)
	}
	gm.Close()
	if n := settle(open.Load, 0); n != 0 {
		t.Fatalf("%d connections left open", n)
	}
	srv.Close()
	if n := settle(func() int64 { return int64(runtime.NumGoroutine()) }, int64(goroutines)); n > int64(goroutines) {
		t.Fatalf("%d goroutines, %d before", n, goroutines)
	}
}

// Python's http.server, a real server that ignores Range, serves a model
// that plans and loads.
func TestPythonHTTPServer(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "python3", "no python3 to run http.server")
	}
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, spec)
	dir := t.TempDir()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.gguf"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ports := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := regexp.MustCompile(`port (\d+)`).FindStringSubmatch(sc.Text()); m != nil {
				ports <- m[1]
				break
			}
		}
		for sc.Scan() {
		}
	}()
	var port string
	select {
	case port = <-ports:
	case <-time.After(30 * time.Second):
		t.Fatal("python3 -m http.server did not say its port")
	}
	var received atomic.Int64
	o := httpsrc.Options{Progress: func(_ string, done, _ int64) { received.Store(done) }}
	gm, err := httpsrc.OpenModel(context.Background(), "http://127.0.0.1:"+port+"/model.gguf", o)
	if err != nil {
		t.Fatal(err)
	}
	defer gm.Close()
	r := gm.Files[0].Source().Reader.(*httpsrc.Reader)
	if !r.Sequential() {
		t.Fatal("python's http.server took range requests")
	}
	if err := loadAndCompare(t, rt, gm, testenv.OpenModel(t, path), loader.Options{}); err != nil {
		t.Fatal(err)
	}
	if r.Requests() != 2 || r.Received() > 2*int64(len(data)) {
		t.Fatalf("%d requests, %d bytes for a file of %d", r.Requests(), r.Received(), len(data))
	}
}

// Onto a device, whose lane would read pieces ahead of itself, several at
// once (TestDeviceLoadReadsAhead): from a server without ranges the lane
// reads in file order, one piece at a time, in one pass.
func TestServerWithoutRangesOntoDevice(t *testing.T) {
	rt := testenv.Runtime(t)
	gpus := testenv.GPUs(t)
	if len(gpus) == 0 {
		testenv.Missing(t, "gpu", "no GPU device to upload to (Vulkan on lavapipe: apt-get install mesa-vulkan-drivers)")
	}
	big := synth.Spec{Layers: 2, Embd: 1024, FF: 4096, Heads: 8, Vocab: 512, Weights: ggml.TypeF16}
	path := reversed(t, testenv.ModelFile(t, rt, big))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fs := &fileServer{data: data, etag: `"v1"`}
	ignoreRanges(fs, nil)
	srv, open := served(t, fs, false)
	gm, err := httpsrc.OpenModel(context.Background(), srv.URL+"/model.gguf", httpsrc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := gm.Files[0].Source().Reader.(*httpsrc.Reader)
	header := r.Received()
	if err := loadOntoAndCompare(t, rt, gm, testenv.OpenModel(t, path), loader.Options{}, gpus[0].Name()); err != nil {
		t.Fatal(err)
	}
	if r.Requests() != 2 || r.Received() > header+int64(len(data)) {
		t.Fatalf("the load took %d requests and %d bytes for a file of %d", r.Requests()-1, r.Received()-header, len(data))
	}
	gm.Close()
	if n := settle(open.Load, 0); n != 0 {
		t.Fatalf("%d connections left open", n)
	}
}
