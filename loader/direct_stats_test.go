//go:build linux

package loader_test

import (
	"context"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"golang.org/x/sys/unix"
)

// A direct-I/O load counts the bounce buffers its reads went through, and
// they stay within what MemoryOf bounds them by; a load without direct I/O
// has none. Direct reads run on at least 8 readers.
func TestDirectBounceCounted(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 4, Embd: 512, FF: 1024, Heads: 4, Vocab: 512})
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Skipf("the file system of %s refuses O_DIRECT (%v): nothing to count", path, err)
	}
	unix.Close(fd)
	m := testenv.OpenModel(t, path)
	for _, c := range []struct {
		mode   place.LoadMode
		direct bool
	}{{place.LoadDirectIO, true}, {place.LoadNone, false}} {
		p, err := place.New(context.Background(), rt, m, place.Params{DeviceNames: []string{"none"}, LoadMode: c.mode, NoExtraBufts: true})
		if err != nil {
			t.Fatal(err)
		}
		lm, err := loader.Load(context.Background(), p, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, bound := lm.Stats.Direct, loader.MemoryOf(p, loader.Options{}).Direct
		readers := lm.Stats.Readers
		lm.Close()
		// direct reads keep 8 in flight (they wait on the disk, not a
		// core); buffered ones take a reader per core, up to 4
		if c.direct && readers < 8 || !c.direct && readers > 4 {
			t.Errorf("%s: %d readers", c.mode, readers)
		}
		switch {
		case c.direct && (got == 0 || got > bound):
			t.Errorf("%s: %d bytes of direct-read bounce buffers, bound %d", c.mode, got, bound)
		case !c.direct && got != 0:
			t.Errorf("%s: %d bytes of direct-read bounce buffers", c.mode, got)
		}
		t.Logf("%s: %d bytes of direct-read bounce buffers (bound %d)", c.mode, got, bound)
	}
}

// Tensors set whole from a bounce buffer (CPU_REPACK's) are read into it
// where their direct reads line up: their whole blocks go straight into
// it, and only the partial blocks at their ends pass through the
// direct-read bounce buffers (those read into the CPU buffer, whose layout
// is not the file's, may pass whole).
func TestDirectReadsLineUp(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 4, Embd: 512, FF: 1536, Heads: 4, Vocab: 512, Weights: ggml.TypeQ4_K, Embeddings: ggml.TypeQ8_0})
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Skipf("the file system of %s refuses O_DIRECT (%v): nothing to line up", path, err)
	}
	unix.Close(fd)
	m := testenv.OpenModel(t, path)
	p, err := place.New(context.Background(), rt, m, place.Params{DeviceNames: []string{"none"}, LoadMode: place.LoadDirectIO})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Load(context.Background(), p, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	st := lm.Stats
	whole, read := st.Moved[loader.PathSync], st.Moved[loader.PathRead]
	if whole == 0 {
		t.Skip("no tensor is set whole here (the CPU repacks none of q4_K)")
	}
	ends := uint64(2*len(m.Weights)) * 4096 // at most a partial block at each end of a tensor
	t.Logf("%d bytes set whole, %d read into the CPU buffer; direct reads copied %d out of bounce buffers", whole, read, st.DirectCopied)
	if st.DirectCopied > read+ends {
		t.Errorf("direct reads copied %d bytes out of bounce buffers: more than the %d read into the CPU buffer and the ends of the tensors set whole (%d)", st.DirectCopied, read, ends)
	}
}
