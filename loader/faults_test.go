package loader_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// A device that cannot allocate: a ggml-rpc-server whose address space is
// capped (prlimit --as) refuses a 1 GiB buffer. The error names the device,
// the buffer type and the size, and the buffers made before it are freed.
func TestAllocationFailureIsNamedAndFreed(t *testing.T) {
	rt := testenv.Runtime(t)
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		testenv.Missing(t, "rpc", "prlimit (util-linux) is needed to cap the server's memory")
	}
	srv := testenv.StartRPCServerWrapped(t, []string{prlimit, "--as=536870912"})
	devs, err := rt.AddRPCServer(context.Background(), srv.Endpoint, ggml.RPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// about 1 GiB of f16 weights, written sparse (zeros never stored)
	spec := synth.Spec{Layers: 1, Embd: 8192, FF: 16384, Heads: 64, Vocab: 4096, Weights: ggml.TypeF16}
	w, err := spec.Writer(rt)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "big.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	size, err := w.WriteMetadata(f)
	if err == nil {
		err = f.Truncate(size)
	}
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	gm := testenv.OpenModel(t, path)
	p := planFor(t, rt, gm, func(p *place.Params) {
		p.LoadMode = place.LoadNone
		p.DeviceNames = []string{devs[0].Name()}
	})
	before := testenv.LiveBuffers()
	_, err = loader.Load(context.Background(), p, loader.Options{})
	if err == nil {
		t.Fatal("a 1 GiB buffer fit in a 512 MiB address space")
	}
	for _, want := range []string{"cannot allocate", devs[0].Name(), "RPC", "MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q lacks %q", err, want)
		}
	}
	// the place: the device, its buffer type; and ggml's call below
	e := wantPlace(t, "allocation", err, loader.Error{Op: "alloc", Path: path, Off: -1, Device: devs[0].Name()})
	var ge *ggml.Error
	if e.BufferType == "" || !errors.As(err, &ge) || ge.Op != "alloc_ctx_tensors_from_buft" || ge.Device != devs[0].Name() || ge.BufferType != e.BufferType {
		t.Fatalf("the place %+v, ggml's %+v: %v", e, ge, err)
	}
	if after := testenv.LiveBuffers(); after != before {
		t.Fatalf("%d buffers leaked", after-before)
	}
}

// mlock refused by the limits: a warning with the limit and the fix, and
// the load goes on. The child runs without CAP_IPC_LOCK (root ignores
// RLIMIT_MEMLOCK otherwise) and with a 64 KiB RLIMIT_MEMLOCK.
func TestMlockRefusedWarnsAndContinues(t *testing.T) {
	if testenv.IsChild() {
		rt := testenv.Runtime(t)
		path := testenv.ModelFile(t, rt, smallSpec)
		gm := testenv.OpenModel(t, path)
		for _, mode := range []place.LoadMode{place.LoadMmapMlock, place.LoadMlock} {
			p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{"none"} })
			lm, err := loader.Load(context.Background(), p, loader.Options{})
			if err != nil {
				t.Fatal(err)
			}
			verify(t, gm, lm)
			if len(lm.Warnings()) == 0 || !strings.Contains(lm.Warnings()[0], "RLIMIT_MEMLOCK") {
				t.Fatalf("%s: no warning", mode)
			}
			lm.Close()
		}
		return
	}
	setpriv, err1 := exec.LookPath("setpriv")
	prlimit, err2 := exec.LookPath("prlimit")
	if err1 != nil || err2 != nil || os.Geteuid() != 0 {
		testenv.Missing(t, "root", "needs root, setpriv and prlimit (util-linux) to drop CAP_IPC_LOCK and cap RLIMIT_MEMLOCK")
	}
	// a child that skips (no runtime, say) makes this test skip
	s := testenv.InChild(t, []string{prlimit, "--memlock=65536:65536", setpriv, "--bounding-set=-ipc_lock", "--inh-caps=-ipc_lock"})
	if !strings.Contains(s, "RLIMIT_MEMLOCK is 65536 bytes") || !strings.Contains(s, "ulimit -l") || !strings.Contains(s, "loading continues") {
		t.Fatalf("no mlock warning in the child's output:\n%s", s)
	}
}

// A file put in the model's place after it was opened (a download finishing,
// a conversion rerun) is refused rather than loaded with stale metadata.
func TestReplacedFileIsRefused(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, smallSpec)
	gm := testenv.OpenModel(t, path)
	other := testenv.ModelFile(t, rt, smallSpec)
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	p := planFor(t, rt, gm, func(p *place.Params) { p.DeviceNames = []string{"none"} })
	lm, err := loader.Load(context.Background(), p, loader.Options{})
	if err == nil {
		lm.Close()
		t.Fatal("a replaced file was loaded")
	}
	if !strings.Contains(err.Error(), "was replaced") || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v", err)
	}
	wantPlace(t, "replaced", err, loader.Error{Op: "open", Path: path, Off: -1}, loader.ErrFileChanged)
}
