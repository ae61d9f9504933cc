package loader

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/loader/internal/mmap"
	"github.com/ggload/ggload/loader/internal/sysmem"
	"github.com/ggload/ggload/place"
)

// Memory is what a load takes from this process's memory and address
// space, by part. The first two stay while the model is loaded; the rest
// (Extra) are at most what the load holds at once beyond them, and all of
// it is given back when Load returns.
//
// By mode, for a model of largest tensor L:
//   - every mode: each device that uploads asynchronously has a staging
//     ring of pinned host memory, 4 slots of 1 MiB (of 64 MiB with direct
//     I/O; Options.StagingSlots and StagingSize set them);
//   - tensors a device takes only whole (its extra buffer types, such as
//     CPU_REPACK; split and meta buffers; RPC servers) go through bounce
//     memory: at most 256 MiB per device, or L when it is bigger (a bigger
//     tensor waits for the sets under way); others, without a staging ring
//     (or with CheckTensors), in pieces of at most 16 MiB;
//   - direct I/O: a 16 MiB bounce buffer per read under way (the readers
//     and one per device);
//   - CheckTensors: a 4 MiB copy per core for rows checked on copies;
//   - files that are not local (an HTTP reader): each device's lane keeps
//     64 MiB of reads ahead (8 pieces of 8 MiB).
//
// Bounce and direct-read memory are anonymous mappings, outside Go's heap,
// unmapped when the load ends; a mapping the system refuses is an error
// wrapping ggml.ErrOutOfMemory.
type Memory struct {
	Weights uint64 // allocated weight buffers in this process: host buffer types, the CPU's, software devices' (lavapipe)
	Mapped  uint64 // the model's files, mapped whole with mmap (address space)
	// MappedIn is the part of Mapped whose pages the load maps in (resident
	// memory, shared with the page cache): the file ranges of the buffers
	// made over the mapping, or a whole file where mmap populates every
	// page (MAP_POPULATE, on kernels without MADV_POPULATE_READ).
	MappedIn uint64
	Staging  uint64 // pinned staging rings
	Bounce   uint64 // bounce buffers, at most, every device together
	Direct   uint64 // direct-read bounce buffers, at most
	Validate uint64 // row-check copies (CheckTensors), at most
}

// Extra is the memory a load holds only while it runs.
func (m Memory) Extra() uint64 { return m.Staging + m.Bounce + m.Direct + m.Validate }

// Total is everything the load takes at its peak.
func (m Memory) Total() uint64 { return m.Weights + m.Mapped + m.Extra() }

// bounce sizes that the lanes use (background.go, data.go).
const (
	setPiece    = 16 << 20 // the most of a chunked set
	checkPiece  = 4 << 20  // a row check's copy
	stagingSize = 1 << 20  // a staging slot without direct I/O
)

// staging is the shape of a staging ring: Options.StagingSlots slots of
// StagingSize bytes, or by default 4 of 1 MiB, or of a direct read
// (directIOBufferSize) and two blocks where the files are read with
// direct I/O of alignment align (> 1).
func (o Options) staging(align uint64) (slots int, size uint64) {
	slots, size = o.StagingSlots, o.StagingSize
	if slots <= 0 {
		slots = 4
	}
	if size == 0 {
		size = stagingSize
		if align > 1 {
			size = directIOBufferSize + 2*align
		}
	}
	return slots, size
}

// MemoryOf bounds what Load(p, o) takes from this process's memory.
func MemoryOf(p *place.Plan, o Options) Memory {
	var m Memory
	m.Mapped, m.MappedIn = mappedMemory(p)
	direct := p.LoadMode == place.LoadDirectIO
	align := uint64(1)
	if direct {
		for _, path := range p.Model.Paths {
			align = max(align, directAlignment(path))
		}
	}
	lanes := laneMemory(p, o, &m)
	n, slot := o.staging(align)
	remote := false
	for _, f := range p.Model.Files {
		remote = remote || !f.Source().Local()
	}
	for _, u := range lanes {
		m.Bounce += max(min(u.sum+u.piece, bgMax), u.largest, u.piece)
		if direct && u.sum > 0 {
			// a tensor set whole starts where its direct reads line up
			// (bounceFor): up to a block more in each buffer the lane
			// holds
			m.Bounce += uint64(laneBounces()) * align
		}
		if u.ring {
			m.Staging += uint64(n) * slot
		}
		if remote {
			m.Bounce += aheadDepth * aheadPiece // the lane's reads ahead (ahead.go)
		}
	}
	if direct && align > 1 {
		readers := uint64(o.Readers)
		if readers == 0 {
			readers = uint64(hostReaders(true))
		}
		m.Direct = (readers + uint64(len(lanes))) * (directChunk + align)
	}
	if o.CheckTensors {
		m.Validate = uint64(runtime.NumCPU()) * checkPiece
	}
	return m
}

// mappedMemory is what the plan maps of its files (all of each, when any
// tensor is mapped), and the part of that the load maps in: a file mapped
// in whole, or its buffers' ranges (a NUMA machine, which prefetches
// nothing, is bounded by the former).
func mappedMemory(p *place.Plan) (mapped, in uint64) {
	use := p.UseMmap
	for _, c := range p.Contexts {
		use = use || c.Mapped || c.Lazy
	}
	if !use {
		return 0, 0
	}
	lazy, _ := lazyRanges(p)
	for i, f := range p.Model.Files {
		mapped += uint64(f.Size)
		if mmap.PopulatesAll(p.UseMmap, lazy[i]) {
			in += uint64(f.Size)
			continue
		}
		for _, c := range p.Contexts {
			if !c.Mapped {
				continue
			}
			for _, b := range c.Buffers {
				if b.File == i {
					in += uint64(b.Last - b.First)
				}
			}
		}
	}
	return mapped, in
}

// laneUse is what one device's lane moves outside the staging ring.
type laneUse struct {
	sum, largest uint64 // bytes of its tensors set whole, and the largest
	piece        uint64 // its largest piece of a set in pieces
	ring         bool   // it uploads through a staging ring
}

// laneMemory is how each device's lane moves the tensors of the plan's
// contexts that are not mapped; the weight buffers in this process are
// added to m.Weights.
func laneMemory(p *place.Plan, o Options, m *Memory) map[*ggml.Device]*laneUse {
	lanes := map[*ggml.Device]*laneUse{}
	for _, c := range p.Contexts {
		if c.Mapped {
			continue
		}
		dev := c.Device
		host := c.BufferType.IsHost()
		if host || dev == nil || dev.Type() == ggml.DeviceCPU || softwareDevice(dev) {
			m.Weights += c.Size
		}
		if host || dev == nil {
			continue // read straight into the tensors
		}
		u := lanes[dev]
		if u == nil {
			u = &laneUse{}
			lanes[dev] = u
		}
		whole := c.BufferType != dev.BufferType() || dev.IsMeta() || dev.IsRPC()
		canRing := !whole && !o.CheckTensors && ringCapable(dev)
		for _, ti := range c.Tensors {
			tp := &p.Tensors[ti]
			if tp.Weight == nil || tp.Shared || tp.Lazy || tp.Weight.Size <= 0 {
				continue
			}
			size := uint64(tp.Weight.Size)
			switch {
			case canRing:
				u.ring = true
			case whole:
				u.sum += size
				u.largest = max(u.largest, size)
			default:
				// set in pieces through one buffer, reused
				u.piece = max(u.piece, min(size, setPiece))
			}
		}
	}
	return lanes
}

// ringCapable reports whether dev uploads through a staging ring (lanes'
// ring, with its reasons).
func ringCapable(dev *ggml.Device) bool {
	caps := dev.Caps()
	_, hasHost := dev.HostBufferType()
	return caps.Async && caps.HostBuffer && caps.Events && hasHost && !dev.IsRPC()
}

// softwareDevice reports a device whose memory is this process's memory
// (a CPU-side Vulkan driver).
func softwareDevice(d *ggml.Device) bool {
	if d == nil || d.Type() == ggml.DeviceCPU {
		return false
	}
	desc := strings.ToLower(d.Description())
	return strings.Contains(desc, "llvmpipe") || strings.Contains(desc, "lavapipe") || strings.Contains(desc, "swiftshader")
}

// addressHeadroom is the address space a load leaves for what it does not
// count: the threads the Go runtime starts for blocking calls (their stacks
// are reserved whole), glibc's arena for a thread that allocates for the
// first time (64 MiB reserved), the growth of Go's heap, the drivers' own.
var addressHeadroom uint64 = 256 << 20

// checkAddressSpace refuses a load that the process's address-space limit
// (RLIMIT_AS, ulimit -v) cannot hold, before anything is allocated: under
// such a limit a thread's creation or the Go heap's growth failing later
// would end the process (pthread_create failed, Go's fatal out of memory)
// instead of failing the load.
func checkAddressSpace(m Memory) error {
	limit, used, ok := sysmem.AddressSpace()
	if !ok {
		return nil
	}
	need := m.Total() + addressHeadroom
	if used+need <= limit {
		return nil
	}
	return fmt.Errorf("loader: the address-space limit (ulimit -v) is %s and the process uses %s: the load needs %s more (weights %s, mapped files %s, staging, bounce and direct-read buffers %s, and %s for threads and the Go runtime); raise the limit: %w",
		mib(limit), mib(used), mib(need), mib(m.Weights), mib(m.Mapped), mib(m.Extra()), mib(addressHeadroom), ggml.ErrOutOfMemory)
}

func mib(n uint64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// directAlignment is the direct I/O alignment of the file at path, as a
// load opening it takes it (openModelFile), 1 where it is not known.
func directAlignment(path string) uint64 {
	st, err := os.Stat(path)
	if err != nil {
		return 1
	}
	align, _ := directAlign(-1, path, int64(blockSize(st)))
	return uint64(align)
}
