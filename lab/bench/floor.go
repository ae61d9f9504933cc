package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/place"
)

// The floors: what this machine does at best with a case's bytes, measured
// once per bench in the parent, so that each load's time reads as a
// fraction of what the hardware allows, not only against llama.cpp.
//
//   - reading the file (from the page cache, as every load here finds it)
//     into fresh memory of the kind a load fills: host memory never touched
//     (huge pages advised, as the loader does) for host buffers, a reused
//     buffer for staging; with O_DIRECT for direct I/O;
//   - mapping the file with its pages populated, for zero copy;
//   - uploading from pinned host memory to each device (into device memory
//     already touched: the transfer itself), from plain memory where a
//     device has no pinned buffer type (RPC servers: the link and the
//     server).
//
// A case's floor is the larger of its reading and its slowest device's
// upload of that device's share: reads and uploads overlap, and the
// devices upload at once (so a device's rate there is measured while the
// case's other devices upload too: they may share a link, a bus or the
// cores that drive them).

// Rates are the machine's rates, in GB/s (0: not measured).
type Rates struct {
	ReadFresh  float64 `json:"read_fresh_gb_per_s"`
	ReadWarm   float64 `json:"read_warm_gb_per_s"`
	ReadDirect float64 `json:"read_direct_gb_per_s,omitempty"`
	// ReadDirectFresh is direct reads into fresh host memory, as a load
	// with direct I/O fills the CPU's buffers: the disk and the kernel's
	// zeroing of the pages it reads into, at once
	ReadDirectFresh float64            `json:"read_direct_fresh_gb_per_s,omitempty"`
	DirectNote      string             `json:"direct_note,omitempty"`
	MapS            float64            `json:"map_s,omitempty"` // the whole file, s
	Upload          map[string]float64 `json:"upload_gb_per_s,omitempty"`
	// UploadAtOnce is, per target spread over several devices, each
	// device's upload rate while the others upload too (uploadRates)
	UploadAtOnce map[string]map[string]float64 `json:"upload_at_once_gb_per_s,omitempty"`
	// ServerTouch is, per RPC server, how fast it first touches the pages
	// of a buffer it has just allocated (serverTouchRate)
	ServerTouch map[string]float64 `json:"server_touch_gb_per_s,omitempty"`
	// Cold (--cold) is one pass over the file from the disk: O_DIRECT at
	// the best of the queue depths tried (ColdDepth reads in flight), or,
	// where direct I/O is refused, buffered reads after an eviction.
	Cold      float64 `json:"cold_gb_per_s,omitempty"`
	ColdDepth int     `json:"cold_depth,omitempty"`
	ColdNote  string  `json:"cold_note,omitempty"`
	// ColdFresh (--cold, direct I/O timed) is the same pass into fresh
	// host memory, as a direct load onto the CPU fills its buffers: the
	// disk and the kernel's zeroing of the pages read into, at once
	ColdFresh float64 `json:"cold_fresh_gb_per_s,omitempty"`
}

// Floor is a case's floor.
type Floor struct {
	S   float64 `json:"s"`
	How string  `json:"how"` // what bounds it
	// Touch is the part of the floor no RPC server's cache can take
	// away: the slowest server's first touch of its new buffers' pages
	// (every weight bound for it is written into them, sent or set from
	// its file cache).
	Touch float64 `json:"touch_s,omitempty"`
}

// floorReaders is how many goroutines read for the floors (the loader's
// default).
func floorReaders() int { return min(runtime.NumCPU(), 4) }

// measureFloors measures the rates the cases need and each case's floor.
func (o *Options) measureFloors(rt *ggml.Runtime, m *gguf.Model, cases []Case, rep *Report) error {
	rep.MemcpyGBps, rep.FirstTouch = memcpyBandwidth()
	r := &rep.Rates
	size := rep.Bytes
	var err error
	o.backMemory(rep) // the fresh pages below as fast as the loads'
	if r.ReadFresh, err = readRate(m.Paths, size, true, false); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	if r.ReadWarm, err = readRate(m.Paths, size, false, false); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	need := map[string]bool{}
	for _, c := range cases {
		need[c.Mode] = true
		if err := measureUploads(rt, c, r); err != nil {
			return err
		}
	}
	direct := need["dio"] || need["direct-io"]
	if direct {
		if err := o.measureDirect(m.Paths, size, r); err != nil {
			return err
		}
	}
	if need["mmap"] || need["mmap+mlock"] || need["mmap-mlock"] || need["auto"] {
		r.MapS = mapTime(m.Paths)
	}
	if o.Cold {
		if err := measureCold(m.Paths, size, direct, r); err != nil {
			return fmt.Errorf("cold floor: %w", err)
		}
	}
	rep.Floors = map[string]Floor{}
	for _, c := range cases {
		f, err := o.floorOf(rt, m, c, r, size)
		if err != nil {
			return err
		}
		rep.Floors[c.Mode+"/"+c.Target] = f
	}
	return nil
}

// measureUploads measures the upload rates case c needs that r lacks:
// each device's alone (and how fast an RPC server first touches new
// pages), and, for a target over several devices, each one's while the
// others upload too.
func measureUploads(rt *ggml.Runtime, c Case, r *Rates) error {
	var devs []*ggml.Device
	for _, d := range c.Devices() {
		if d == "none" {
			continue
		}
		dev, err := rt.DeviceByName(d)
		if err != nil {
			return err
		}
		devs = append(devs, dev)
		if r.Upload[d] == 0 {
			gbps, err := uploadRate(dev)
			if err != nil {
				return fmt.Errorf("upload floor of %s: %w", d, err)
			}
			if r.Upload == nil {
				r.Upload = map[string]float64{}
			}
			r.Upload[d] = gbps
			if dev.IsRPC() {
				touch, err := serverTouchRate(dev)
				if err != nil {
					return fmt.Errorf("floor of %s's server: %w", d, err)
				}
				if r.ServerTouch == nil {
					r.ServerTouch = map[string]float64{}
				}
				r.ServerTouch[d] = touch
			}
		}
	}
	if len(devs) > 1 && r.UploadAtOnce[c.Target] == nil {
		gbps, err := uploadRates(devs)
		if err != nil {
			return fmt.Errorf("upload floor of %s: %w", c.Target, err)
		}
		if r.UploadAtOnce == nil {
			r.UploadAtOnce = map[string]map[string]float64{}
		}
		r.UploadAtOnce[c.Target] = map[string]float64{}
		for i, d := range devs {
			r.UploadAtOnce[c.Target][d.Name()] = gbps[i]
		}
	}
	return nil
}

// measureDirect measures the direct reads' rates: into reused memory, and
// (warm) into fresh host memory; where direct I/O is refused, the
// page-cache reads' rates stand for them, with a note.
func (o *Options) measureDirect(paths []string, size int64, r *Rates) error {
	var err error
	if r.ReadDirect, err = readRate(paths, size, false, true); err != nil {
		r.ReadDirect, r.DirectNote = r.ReadWarm, fmt.Sprintf("no direct I/O here (%v): page-cache reads instead", err)
		r.ReadDirectFresh = r.ReadFresh
	} else if !o.Cold { // cold, the disk's pass is the floor
		if r.ReadDirectFresh, err = readRate(paths, size, true, true); err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		// the disk gave at least that into reused memory too (a
		// virtual disk has slow moments: a pass may meet one)
		r.ReadDirect = max(r.ReadDirect, r.ReadDirectFresh)
	}
	return nil
}

// measureCold measures the cold floor and bounds the other rates by it;
// direct: the cases read with direct I/O, whose floor onto the CPU is the
// cold pass into fresh memory.
func measureCold(paths []string, size int64, direct bool, r *Rates) error {
	if err := coldRate(paths, size, r); err != nil {
		return err
	}
	// every byte comes from the disk first: no read is faster than
	// that, and a mapping populates at that rate
	// direct reads are reads from the disk: their floor is the cold
	// read's, the best of its queue depths (a pass of the floor's own
	// readers may have been slower)
	r.ReadFresh, r.ReadWarm, r.ReadDirect = min(r.ReadFresh, r.Cold), min(r.ReadWarm, r.Cold), r.Cold
	if direct {
		if err := coldFreshRate(paths, size, r); err != nil {
			return err
		}
		r.ReadDirectFresh = r.ColdFresh
	}
	r.MapS = max(r.MapS, float64(size)/r.Cold/1e9)
	return nil
}

// caseBytes are where a plan's weights go, in bytes: mapped (they stay
// in the mapping), host (fresh host memory), and devices (read once,
// through staging, for the devices, with each device's share).
type caseBytes struct {
	mapped, host, devices int64
	dev                   map[string]int64
}

// bytesOf tallies the plan's weights by where they go.
func bytesOf(p *place.Plan) caseBytes {
	b := caseBytes{dev: map[string]int64{}}
	for _, tp := range p.Tensors {
		if tp.Context < 0 || tp.Shared {
			continue
		}
		switch {
		case p.Contexts[tp.Context].Mapped:
			b.mapped += tp.Bytes
		case tp.Device == nil || tp.Device.Type() == ggml.DeviceCPU || tp.BufferType.IsHost():
			b.host += tp.Bytes
		case tp.Split != nil:
			b.devices += tp.Bytes
			// a meta device: each of its devices takes its slices (a
			// mirrored tensor whole)
			for j, d := range p.TensorDevices {
				n := tp.Bytes
				if tp.Split.Axis.IsDim() {
					n = tp.Bytes * tp.Split.Share(j) / tp.Shape[tp.Split.Axis]
				}
				b.dev[d.Name()] += n
			}
		default:
			b.devices += tp.Bytes
			b.dev[tp.Device.Name()] += tp.Bytes
		}
	}
	return b
}

// secondsAt is the seconds n bytes take at gbps GB/s (0: not counted).
func secondsAt(n int64, gbps float64) float64 {
	if n == 0 || gbps <= 0 {
		return 0
	}
	return float64(n) / gbps / 1e9
}

// floorOf is case c's floor: its plan says how many bytes go where.
func (o *Options) floorOf(rt *ggml.Runtime, m *gguf.Model, c Case, r *Rates, size int64) (Floor, error) {
	params, err := o.process(ImplGgload, c, "").params()
	if err != nil {
		return Floor{}, err
	}
	p, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		return Floor{}, fmt.Errorf("floor of %s: %w", c.Target, err)
	}
	b := bytesOf(p)
	var read float64
	how := ""
	switch {
	case p.UseMmap:
		// tensors in buffers over the mapping stay there; the others
		// are copied out of it: into fresh host memory (CPU_REPACK),
		// or through staging to a device
		read = r.MapS*float64(b.mapped)/float64(max(size, 1)) + secondsAt(b.host, r.ReadFresh) + secondsAt(b.devices, r.ReadWarm)
		how = "mapping the file, copying what cannot stay in it"
	case params.LoadMode == place.LoadDirectIO:
		// host buffers are fresh memory the reads fault in; staging
		// is reused
		read = secondsAt(b.host+b.mapped, r.ReadDirectFresh) + secondsAt(b.devices, r.ReadDirect)
		how = "reading with direct I/O"
	default:
		read = secondsAt(b.host+b.mapped, r.ReadFresh) + secondsAt(b.devices, r.ReadWarm)
		how = "reading into fresh host memory and staging"
	}
	f := Floor{S: read, How: how}
	rate := r.Upload
	if once := r.UploadAtOnce[c.Target]; once != nil {
		rate = once // the devices upload at once
	}
	for d, n := range b.dev {
		mib := float64(n) / (1 << 20)
		if up := secondsAt(n, rate[d]); up > f.S {
			f.S, f.How = up, fmt.Sprintf("uploading %s's %.0f MiB", d, mib)
		}
		// an RPC server writes every byte into pages it touches for
		// the first time, on one thread, whatever the link
		if t := secondsAt(n, r.ServerTouch[d]); t > f.Touch {
			f.Touch = t
			if t > f.S {
				f.S, f.How = t, fmt.Sprintf("%s's server touching the %.0f MiB of its new buffers", d, mib)
			}
		}
	}
	return f, nil
}

// serverTouchRate is how fast d's RPC server first touches the pages of a
// buffer it has just allocated: BUFFER_CLEAR of a new floorBuffer, best of
// three buffers. A load writes every weight bound for d into new buffers,
// so none goes faster than its bytes at this rate, whatever the link (a
// server host that hands out fresh pages slowly, 4 KiB at a time without
// huge pages, bounds it here).
func serverTouchRate(d *ggml.Device) (float64, error) {
	best := 0.0
	for range 3 {
		t, buf, free, err := floorBuffer(d)
		if err != nil {
			return 0, err
		}
		n := t.NBytes()
		start := time.Now()
		if err = buf.Clear(0); err == nil {
			err = waitBehind(t) // the clear is queued
		}
		s := time.Since(start).Seconds()
		free()
		if err == nil {
			err = d.Err()
		}
		if err != nil {
			return 0, err
		}
		best = max(best, float64(n)/s/1e9)
	}
	return best, nil
}

// coldDepths are the queue depths the cold floor tries.
var coldDepths = []int{1, 2, 4, 8, 16}

// coldRate measures the cold floor: one O_DIRECT pass over the files per
// queue depth, twice over the depths (a virtual disk has slow moments),
// the best kept; buffered reads after an eviction where the file system
// refuses direct I/O.
func coldRate(paths []string, size int64, r *Rates) error {
	for i := range 2 * len(coldDepths) {
		depth := coldDepths[i%len(coldDepths)]
		d, derr := readOnceWith(paths, size, false, true, depth)
		if derr != nil {
			if i > 0 {
				return derr
			}
			if err := evictPageCache(paths); err != nil {
				return err
			}
			d, err := readOnceWith(paths, size, false, false, floorReaders())
			if err != nil {
				return err
			}
			r.Cold, r.ColdDepth = float64(size)/d.Seconds()/1e9, floorReaders()
			r.ColdNote = fmt.Sprintf("no direct I/O here (%v): buffered reads of the evicted file", derr)
			return nil
		}
		if gbps := float64(size) / d.Seconds() / 1e9; gbps > r.Cold {
			r.Cold, r.ColdDepth = gbps, depth
		}
	}
	return nil
}

// coldFreshRate measures the cold pass into fresh memory (ColdFresh): at
// the cold floor's depth and with the floor's readers, twice each, the
// best kept, and never above the pass into reused memory.
func coldFreshRate(paths []string, size int64, r *Rates) error {
	if r.ColdNote != "" {
		r.ColdFresh = r.Cold // no direct I/O: the floor's buffered pass
		return nil
	}
	for i := range 4 {
		depth := r.ColdDepth
		if i%2 == 1 {
			depth = floorReaders()
		}
		d, err := readOnceWith(paths, size, true, true, depth)
		if err != nil {
			return err
		}
		r.ColdFresh = max(r.ColdFresh, float64(size)/d.Seconds()/1e9)
	}
	r.ColdFresh = min(r.ColdFresh, r.Cold)
	return nil
}

// readRate reads the files with the floor's readers, 8 MiB at a time:
// into fresh memory (huge pages advised) or into one reused buffer per
// reader; with O_DIRECT when direct. Best of two passes.
func readRate(paths []string, size int64, fresh, direct bool) (float64, error) {
	best := 0.0
	for range 2 {
		d, err := readOnce(paths, size, fresh, direct)
		if err != nil {
			return 0, err
		}
		best = max(best, float64(size)/d.Seconds()/1e9)
	}
	return best, nil
}

func readOnce(paths []string, size int64, fresh, direct bool) (time.Duration, error) {
	return readOnceWith(paths, size, fresh, direct, floorReaders())
}

// readOnceWith reads the files once with n readers.
func readOnceWith(paths []string, size int64, fresh, direct bool, n int) (time.Duration, error) {
	const chunk = 8 << 20
	type job struct {
		f        *os.File
		off, dst int64
		n        int
	}
	var dst []byte
	if fresh {
		b, err := freshPages(int(size + chunk))
		if err != nil {
			return 0, err
		}
		defer releasePages(b)
		dst = b
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var jobs []job
	pos := int64(0)
	for _, p := range paths {
		var f *os.File
		var err error
		if direct {
			f, err = openDirect(p)
		} else {
			f, err = os.Open(p)
		}
		if err != nil {
			return 0, err
		}
		files = append(files, f)
		st, err := f.Stat()
		if err != nil {
			return 0, err
		}
		for off := int64(0); off < st.Size(); off += chunk {
			jobs = append(jobs, job{f, off, pos, chunk})
			pos += chunk
		}
	}
	ch := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := alignedBytes(chunk, 4096)
			for j := range ch {
				buf := own
				if fresh {
					buf = dst[j.dst : j.dst+chunk]
				}
				if _, err := j.f.ReadAt(buf[:j.n], j.off); err != nil && err != io.EOF {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return time.Since(start), first
}

// alignedBytes returns n bytes aligned to align (direct I/O).
func alignedBytes(n, align int) []byte {
	raw := make([]byte, n+align)
	skip := (align - int(uintptr(unsafe.Pointer(&raw[0])))&(align-1)) & (align - 1)
	return raw[skip : skip+n]
}

// uploadRate times copies of 256 MiB into a device buffer (an RPC
// server's too: a link shaped by a token bucket passes its burst at once
// after every pause, which a shorter copy would count as the link's rate),
// best of three after one that warms the buffer up: from
// the device's pinned host buffer type with an asynchronous copy, from
// plain memory through the RPC guard's own requests where it sends tensor
// data (as ggload's loads do, rpcFloorPiece each: the native client's
// hashing and copy are not the link's), or with tensor_set.
func uploadRate(d *ggml.Device) (float64, error) {
	r, err := uploadRates([]*ggml.Device{d})
	if err != nil {
		return 0, err
	}
	return r[0], nil
}

// uploadRates times the copies of uploadRate into every device of devs at
// once, as a load spread over them uploads: each device's rate is its
// copy over the time it took while the others ran, best of three.
func uploadRates(devs []*ggml.Device) ([]float64, error) {
	ups := make([]*uploader, len(devs))
	defer func() {
		for _, u := range ups {
			if u != nil {
				u.free()
			}
		}
	}()
	for i, d := range devs {
		u, err := newUploader(d)
		if err != nil {
			return nil, err
		}
		ups[i] = u
	}
	best := make([]float64, len(devs))
	for range 4 { // the first warms up
		errs := make([]error, len(devs))
		var wg sync.WaitGroup
		for i, u := range ups {
			wg.Go(func() {
				start := time.Now()
				if errs[i] = u.copyOnce(); errs[i] == nil {
					errs[i] = devs[i].Err()
				}
				best[i] = max(best[i], float64(u.n)/time.Since(start).Seconds()/1e9)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	return best, nil
}

// rpcFloorPiece is the size of the requests uploadRate sends an RPC server:
// the size of a layer's tensors (a load sends each tensor as one request),
// and small enough for the pin's server to take each into memory it
// reuses (glibc's malloc keeps a freed block of up to 32 MiB in its heap;
// a bigger one is mapped anew, and zeroed, for every request).
const rpcFloorPiece = 4 << 20

// uploader is one device's copy of uploadRate, ready to time.
type uploader struct {
	n        uint64
	copyOnce func() error
	frees    []func()
}

func (u *uploader) free() {
	for i := len(u.frees) - 1; i >= 0; i-- {
		u.frees[i]()
	}
}

// newUploader makes d's buffer and source for uploadRate's copy.
func newUploader(d *ggml.Device) (_ *uploader, err error) {
	u := &uploader{}
	defer func() {
		if err != nil {
			u.free()
		}
	}()
	t, _, free, err := floorBuffer(d)
	if err != nil {
		return nil, err
	}
	u.frees = append(u.frees, free)
	u.n = t.NBytes()
	n := u.n
	if host, ok := d.HostBufferType(); ok && d.Caps().Async {
		pinned, err := host.Alloc(n)
		if err != nil {
			return nil, err
		}
		u.frees = append(u.frees, func() { pinned.Free() })
		if err := pinned.Clear(1); err != nil {
			return nil, err
		}
		be, err := d.NewBackend()
		if err != nil {
			return nil, err
		}
		u.frees = append(u.frees, func() { be.Free() })
		u.copyOnce = func() error {
			if err := be.SetTensorAsync(t, pinned.Base(), 0, n); err != nil {
				return err
			}
			return be.Synchronize()
		}
		return u, nil
	}
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	u.copyOnce = func() error { return t.Set(src, 0) }
	if d.SendsRPC() {
		u.copyOnce = func() error {
			// in sets of rpcFloorPiece, as a load sends tensors: one
			// message of the whole would have the server take it into
			// fresh memory, which a load's smaller ones do not
			pieces := int((n + rpcFloorPiece - 1) / rpcFloorPiece)
			done := make(chan error, pieces)
			for off := uint64(0); off < n; off += rpcFloorPiece {
				size := min(rpcFloorPiece, n-off)
				if err := d.SendRPC(ggml.RPCSet{Tensor: t, Offset: off, Size: size, Data: src[off : off+size], Done: func(_ bool, err error) { done <- err }}); err != nil {
					return err
				}
			}
			var first error
			for range pieces {
				if err := <-done; err != nil && first == nil {
					first = err
				}
			}
			if first != nil {
				return first
			}
			// the server has the bytes once it answers a request
			// queued behind them
			return waitBehind(t)
		}
	}
	return u, nil
}

// floorBuffer makes a new buffer on d holding one byte tensor of 256 MiB
// (less where d's buffers are smaller), for the floors to fill; free frees
// both.
func floorBuffer(d *ggml.Device) (t *ggml.Tensor, buf *ggml.Buffer, free func(), err error) {
	n := uint64(256 << 20)
	if m := d.BufferType().MaxSize(); m > 0 && m < n {
		n = m &^ 4095
	}
	ctx, err := d.Runtime().NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		return nil, nil, nil, err
	}
	if t, err = ctx.NewTensor(ggml.TypeI8, int64(n)); err == nil {
		buf, err = ctx.AllocTensors(d.BufferType())
	}
	if err != nil {
		ctx.Free()
		return nil, nil, nil, err
	}
	return t, buf, func() { buf.Free(); ctx.Free() }, nil
}

// waitBehind returns once what was queued for t's device before it is
// done: a native read of one byte waits behind it.
func waitBehind(t *ggml.Tensor) error {
	var b [1]byte
	return t.Get(b[:], 0)
}

// memcpyBandwidth measures one thread's copy bandwidth into warm pages and
// into pages freshly mapped from the kernel (huge pages advised as the
// loader advises its CPU buffers), best of three.
func memcpyBandwidth() (warm, fresh float64) {
	const n = 256 << 20
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	dst := make([]byte, n)
	copy(dst, src)
	for i := 0; i < 3; i++ {
		start := time.Now()
		copy(dst, src)
		warm = max(warm, n/time.Since(start).Seconds()/1e9)
		d, err := freshPages(n)
		if err != nil {
			continue
		}
		start = time.Now()
		copy(d, src)
		fresh = max(fresh, n/time.Since(start).Seconds()/1e9)
		releasePages(d)
	}
	return warm, fresh
}

// printFloors prints the rates and the floors.
func printFloors(w io.Writer, rep Report) {
	r := rep.Rates
	fmt.Fprintf(w, "model %s: %.2f GiB; %d process(es) per measurement: median [min–max]\n", rep.Model, float64(rep.Bytes)/(1<<30), rep.Runs)
	if rep.Fit {
		fmt.Fprintln(w, "each load call fits first, as the CLIs' default -fit does (a default context sized, the plan and the load as the fit leaves them)")
	}
	fmt.Fprintf(w, "this machine: memcpy %.1f GB/s (fresh pages %.1f); the file read by %d readers into fresh host memory %.2f GB/s, into staging %.2f GB/s",
		rep.MemcpyGBps, rep.FirstTouch, floorReaders(), r.ReadFresh, r.ReadWarm)
	if r.ReadDirect > 0 {
		fmt.Fprintf(w, ", with direct I/O %.2f GB/s", r.ReadDirect)
		if r.ReadDirectFresh > 0 && !rep.Cold {
			fmt.Fprintf(w, " (into fresh host memory %.2f)", r.ReadDirectFresh)
		}
	}
	if r.MapS > 0 {
		fmt.Fprintf(w, "; mapped and populated in %.3f s", r.MapS)
	}
	fmt.Fprintln(w)
	if r.DirectNote != "" {
		fmt.Fprintln(w, "  "+r.DirectNote)
	}
	if rep.Cold {
		fmt.Fprintf(w, "  cold (--cold: the file's pages evicted before every process): the disk gives %.2f GB/s (one O_DIRECT pass, %d reads in flight), which bounds every floor", r.Cold, r.ColdDepth)
		if r.ColdFresh > 0 {
			fmt.Fprintf(w, "; %.2f GB/s into fresh host memory, the floor of direct reads onto the CPU", r.ColdFresh)
		}
		fmt.Fprintln(w)
		if r.ColdNote != "" {
			fmt.Fprintln(w, "  "+r.ColdNote)
		}
	}
	if rep.FreePageReporting {
		if rep.BackedMemory > 0 {
			fmt.Fprintf(w, "  memory: this virtual machine's balloon reports free memory to its host, which takes it back; before every process %.1f GiB were faulted in and freed, so that each finds fresh pages as fast as the machine makes them (--no-back-memory: as they come)\n", float64(rep.BackedMemory)/(1<<30))
		} else {
			fmt.Fprintln(w, "  memory: this virtual machine's balloon reports free memory to its host, which takes it back: a process that starts after a pause waits for its fresh pages, and times vary with it")
		}
	}
	if len(rep.WarmedRPC) > 0 {
		fmt.Fprintf(w, "  RPC servers: one untimed load onto %s went first, so that servers with a file cache (-c) hold the big weights in every timed run (--rpc-cache-dir: none does)\n", strings.Join(rep.WarmedRPC, ", "))
	}
	var names []string
	for d := range r.Upload {
		names = append(names, d)
	}
	slices.Sort(names)
	for _, d := range names {
		fmt.Fprintf(w, "  %s: uploads %.2f GB/s", d, r.Upload[d])
		if t := r.ServerTouch[d]; t > 0 {
			fmt.Fprintf(w, "; its server touches a new buffer's pages at %.2f GB/s", t)
		}
		fmt.Fprintln(w)
	}
	names = names[:0]
	for tg := range r.UploadAtOnce {
		names = append(names, tg)
	}
	slices.Sort(names)
	for _, tg := range names {
		once := r.UploadAtOnce[tg]
		var parts []string
		for _, d := range strings.Split(tg, "+") {
			if v, ok := once[d]; ok {
				parts = append(parts, fmt.Sprintf("%s %.2f GB/s", d, v))
			}
		}
		fmt.Fprintf(w, "  %s, uploading at once: %s\n", tg, strings.Join(parts, ", "))
	}
}
