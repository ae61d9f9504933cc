package loader

import (
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/loader/internal/mmap"
	"github.com/ggload/ggload/loader/internal/sysmem"
	"github.com/ggload/ggload/place"
)

// Placement is one tensor of the plan, loaded.
type Placement struct {
	Plan   *place.TensorPlan
	Tensor *ggml.Tensor // nil for unused tensors
	Buffer *LoadedBuffer
	Path   Path // how its bytes arrived
}

// Path is how a tensor's bytes reached its buffer.
type Path string

// Paths.
const (
	PathZeroCopy Path = "zero-copy"   // the tensor points into the mapping
	PathRead     Path = "read"        // read from the file into a host buffer
	PathStaged   Path = "staged"      // read into pinned staging buffers, uploaded asynchronously
	PathSync     Path = "sync-upload" // read into memory, uploaded synchronously
	PathShared   Path = "shared"      // a duplicate that reuses its context's tensor
	PathUnused   Path = "unused"
	PathLazy     Path = "lazy" // left in the mapping, read on demand
)

// LoadedBuffer is a weight buffer of the model.
type LoadedBuffer struct {
	Buffer     *ggml.Buffer
	BufferType ggml.BufferType
	Device     *ggml.Device
	Mapped     bool
	Lazy       bool
	File       int
	First      int64
	Last       int64
	context    int
}

// Stats are the load's timings and volumes.
type Stats struct {
	Open, Map, Alloc, Data, Validate, Total time.Duration
	Bytes                                   uint64 // bytes of tensors loaded (zero copy included)
	Moved                                   map[Path]uint64
	Readers                                 int
	StagingSlots                            int
	StagingSize                             uint64
	// Confirm is the longest a lane spent reading back a sample of every
	// tensor it sent to an RPC server, from queueing the reads (behind
	// its last sets, still on their way) to comparing them; Confirmed
	// counts the tensors.
	Confirm   time.Duration
	Confirmed int
	// RPCCached is the bytes of tensors that RPC servers set from their
	// file cache, unsent and unread here; RPCHashed is the bytes hashed
	// to ask the caches for them (the others' hashes came from the hash
	// index, Options.HashIndex).
	RPCCached, RPCHashed uint64
	// Direct is the bytes of the bounce buffers direct reads went
	// through (Memory.Direct bounds it); DirectCopied is the bytes they
	// copied out (the other bytes read directly went straight into the
	// memory they were read for: the tensors' or the staging slots').
	Direct, DirectCopied uint64
	// Devices are the upload pipelines that ran at once, one per device
	// (host memory shares one), in the order they were dealt tensors.
	Devices []DeviceStats
}

// DeviceStats is one device's upload pipeline during a load.
type DeviceStats struct {
	Device  string        // the device's name; "host" for host memory
	Tensors int           // tensors it moved
	Bytes   uint64        // and their bytes
	Time    time.Duration // from its start to its last byte
	Staging uint64        // bytes of its pinned staging rings
	Bounce  uint64        // the most bytes of bounce buffers it held at once
}

// GBps is the throughput of the data phase.
func (s Stats) GBps() float64 {
	if s.Data <= 0 {
		return 0
	}
	return float64(s.Bytes) / s.Data.Seconds() / 1e9
}

// Model is a loaded model: its tensors live in their buffers on their
// devices until Close. A Model is safe for concurrent use: its tensors can
// be read from many goroutines, and Close waits for reads and Verify in
// progress; afterwards its tensors and methods answer ErrClosed.
type Model struct {
	Plan  *place.Plan
	Stats Stats

	mu     sync.RWMutex // write-held by Close
	closed bool

	files      []*modelFile
	stamps     []fileStamp // each file as opened
	mappings   []*mmap.Mapping
	locks      []*sysmem.Lock
	contexts   []*ggml.Context
	buffers    []*LoadedBuffer
	placements []Placement
	byName     map[string]int
	warnings   []string
	statsMu    sync.Mutex
}

// ErrClosed is wrapped by the errors of a closed Model's methods; its
// tensors answer ggml.ErrClosed, which is the same error.
var ErrClosed = ggml.ErrClosed

// hold keeps the model open until release; op names the method in its
// error.
func (m *Model) hold(op string) error {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return &Error{Op: op, Off: -1, Err: fmt.Errorf("loader: %s: %w: the model is closed", op, ErrClosed)}
	}
	return nil
}

func (m *Model) release() { m.mu.RUnlock() }

// Use runs fn with the model held open, for a program that computes with
// its tensors (infer's decodes): Close waits until fn returns. On a
// closed model it runs nothing and answers an error wrapping ErrClosed,
// named by op. fn must not call the model's other methods (a Close
// waiting between two holds would leave both waiting).
func (m *Model) Use(op string, fn func() error) error {
	if err := m.hold(op); err != nil {
		return err
	}
	defer m.release()
	return fn()
}

// Tensor returns the named tensor (for a tensor placed twice, such as a
// tied embedding, the first placement); none once closed.
func (m *Model) Tensor(name string) (*ggml.Tensor, bool) {
	if m.hold("tensor") != nil {
		return nil, false
	}
	defer m.release()
	return m.tensor(name)
}

// tensor is Tensor with the model held.
func (m *Model) tensor(name string) (*ggml.Tensor, bool) {
	i, ok := m.byName[name]
	if !ok || m.placements[i].Tensor == nil {
		return nil, false
	}
	return m.placements[i].Tensor, true
}

// Placements walks every placement in plan order.
func (m *Model) Placements() iter.Seq[Placement] {
	return func(yield func(Placement) bool) {
		for _, pl := range m.placements {
			if !yield(pl) {
				return
			}
		}
	}
}

// Buffers lists the weight buffers.
func (m *Model) Buffers() []*LoadedBuffer { return m.buffers }

// Warnings are the problems the load worked around (mlock refused, direct
// I/O unavailable, ...).
func (m *Model) Warnings() []string { return m.warnings }

// Close frees the contexts (their tensors then answer ErrClosed), the
// buffers and the mappings, and closes the files, once the reads in
// progress are done. Closing twice, or a nil *Model, does nothing.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.free()
}

// free releases everything, tensors first (a load that fails calls it
// too).
func (m *Model) free() error {
	// unlock before the memory goes back (to the allocator, which may hand
	// it to the next model, or to the system)
	for _, l := range m.locks {
		l.Release()
	}
	m.locks = nil
	for _, c := range m.contexts {
		c.Free()
	}
	m.contexts = nil
	for _, b := range m.buffers {
		b.Buffer.Free() // the list stays for reports
	}
	var first error
	var path string
	for _, mp := range m.mappings {
		if mp != nil {
			if err := mp.Close(); err != nil && first == nil {
				first, path = err, mp.Path()
			}
		}
	}
	m.mappings = nil
	for _, f := range m.files {
		if err := f.Close(); err != nil && first == nil {
			first, path = err, f.path
		}
	}
	m.files = nil
	ggml.ReleaseFreedMemory()
	if first != nil {
		return fileError("close", path, -1, fmt.Errorf("loader: close: %w", first))
	}
	return nil
}
