package loader

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// readerPool reads tensors into host buffers with several goroutines, each
// taking a chunk of a tensor at a time: the destination's page faults and
// the page-cache copies run in parallel.
type readerPool struct {
	n     int
	chunk int64
	l     *load
	jobs  chan readJob
	wg    sync.WaitGroup

	mu      sync.Mutex
	first   error
	stopped atomic.Bool
	closed  bool
}

type readJob struct {
	ln     *lane
	t      task
	f      *modelFile
	off, n int64
	left   *atomic.Int32 // chunks of the tensor still to read
}

func newReaderPool(l *load, n int) *readerPool {
	chunk := l.o.ChunkSize
	if chunk <= 0 {
		chunk = 8 << 20
	}
	p := &readerPool{n: n, chunk: chunk, l: l}
	if n > 1 {
		p.jobs = make(chan readJob, 2*n)
		for range n {
			p.wg.Add(1)
			go p.work()
		}
	}
	return p
}

func (p *readerPool) fail(err error) {
	p.mu.Lock()
	if p.first == nil {
		p.first = err
	}
	p.mu.Unlock()
	p.stopped.Store(true)
}

func (p *readerPool) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

// submit queues a tensor's chunks (or reads it now with one reader).
func (p *readerPool) submit(ln *lane, t task, f *modelFile) error {
	size := t.w.Size
	if size == 0 {
		return nil
	}
	left := new(atomic.Int32)
	left.Store(int32((size + p.chunk - 1) / p.chunk))
	for off := int64(0); off < size; off += p.chunk {
		j := readJob{ln: ln, t: t, f: f, off: off, n: min(p.chunk, size-off), left: left}
		if p.n <= 1 {
			p.do(j)
			if err := p.err(); err != nil {
				return err
			}
		} else {
			p.jobs <- j
		}
		if err := p.l.progress(); err != nil {
			return err
		}
	}
	return p.err()
}

func (p *readerPool) work() {
	defer p.wg.Done()
	for j := range p.jobs {
		if p.stopped.Load() || p.l.canceled() != nil {
			continue
		}
		p.do(j)
	}
}

func (p *readerPool) do(j readJob) {
	l, tp := p.l, j.t.pl.Plan
	if j.n > 0 {
		dst := unsafe.Slice((*byte)(unsafe.Add(loadData(j.t.pl.Tensor), j.off)), j.n)
		if err := j.f.readAt(dst, j.t.w.Offset+j.off); err != nil {
			p.fail(l.tensorError("load", tp, fmt.Errorf("loader: tensor '%s': %w", tp.Name, namingFile(err, j.f.path, j.t.w))))
			return
		}
		j.ln.addDone(PathRead, uint64(j.n))
	}
	if j.left.Add(-1) == 0 && l.o.CheckTensors {
		l.validateAsync(tp.Name, tp.Type, loadData(j.t.pl.Tensor), uint64(tp.Bytes))
	}
}

// wait lets the queued reads finish, reporting progress meanwhile.
func (p *readerPool) wait(l *load) error {
	if p.n > 1 && !p.closed {
		p.closed = true
		close(p.jobs)
		done := make(chan struct{})
		go func() { p.wg.Wait(); close(done) }()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
	loop:
		for {
			select {
			case <-done:
				break loop
			case <-tick.C:
				if err := l.progress(); err != nil {
					p.fail(err)
					<-done
					break loop
				}
			}
		}
	}
	return p.err()
}

// stop ends the workers (after an error or a cancellation).
func (p *readerPool) stop() {
	p.stopped.Store(true)
	if p.n > 1 && !p.closed {
		p.closed = true
		close(p.jobs)
	}
	p.wg.Wait()
}

// readChunkDirect reads [pos, pos+len(dst)) aligned; bytes past the end of
// the file read as zeros (alignment padding of the last chunk).
func (f *modelFile) readChunk(dst []byte, pos int64) error {
	got, err := f.readDirect(dst, pos)
	if err != nil {
		if directRefused(err) {
			f.fallBack(err)
			return f.readChunk(dst, pos)
		}
		return err
	}
	if got < len(dst) {
		if pos+int64(got) < f.size {
			return f.truncated(pos+int64(got), false)
		}
		clear(dst[got:])
	}
	return nil
}

// remoteReaders is the default number of readers of a model whose files
// are not local (an HTTP reader, say): each read waits on the network, not
// a core, and more in flight keep the link busy.
const remoteReaders = 8

// directReaders is the least number of readers a load takes by default
// when it reads its files with direct I/O: a direct read waits on the disk
// and copies nothing on a core, and more reads in flight hide the faults
// of the fresh memory they go into (onto the CPU, 0.19-0.22 s against
// 0.22-0.30 s with 2 readers, for a cold 1 GiB file on two cores).
const directReaders = 8

// hostReaders is the default number of readers of local files: as many as
// the cores, up to 4, and at least directReaders with direct I/O.
func hostReaders(direct bool) int {
	n := min(runtime.NumCPU(), 4)
	if direct {
		n = max(n, directReaders)
	}
	return n
}

func (l *load) readerCount() int {
	if l.sequential() {
		return 1
	}
	if l.o.Readers > 0 {
		return l.o.Readers
	}
	for _, f := range l.p.Model.Files {
		if !f.Source().Local() {
			return remoteReaders
		}
	}
	direct := false
	for _, f := range l.model.files {
		direct = direct || f.alignment() > 1
	}
	return hostReaders(direct)
}
