package rpcrelay

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// fakeCache is a server's side of the guard's sets: a file cache by hash,
// replies to probes held back until a few are waiting (or the link is
// idle), so that only probes written ahead of their replies get answers
// soon.
type fakeCache struct {
	conn     net.Conn
	mu       sync.Mutex
	cache    map[uint64]bool
	sets     map[uint64]byte // offset → cache flag of the SET_TENSOR
	probes   int
	maxAhead int
	breakAt  int               // close the connection at this request (0: never)
	garbage  bool              // answer probes and reads with a reply of the wrong size
	data     map[uint64][]byte // offset → the bytes of the last SET_TENSOR there
	gets     int
}

func (f *fakeCache) serve() {
	defer f.conn.Close()
	var pending []byte
	flush := func() {
		if len(pending) > 0 {
			f.conn.Write(pending)
			pending = nil
		}
	}
	hdr := make([]byte, 9)
	for n := 1; ; n++ {
		f.conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := io.ReadFull(f.conn, hdr[:1]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				flush()
				n--
				continue
			}
			return
		}
		f.conn.SetReadDeadline(time.Time{})
		if _, err := io.ReadFull(f.conn, hdr[1:]); err != nil {
			return
		}
		if n == f.breakAt {
			return
		}
		body := make([]byte, binary.LittleEndian.Uint64(hdr[1:]))
		if _, err := io.ReadFull(f.conn, body); err != nil {
			return
		}
		f.mu.Lock()
		switch hdr[0] {
		case CmdSetTensorHash:
			h := binary.LittleEndian.Uint64(body[TensorSize+8:])
			hit := byte(0)
			if f.cache[h] {
				hit = 1
			}
			rsp := []byte{1, 0, 0, 0, 0, 0, 0, 0, hit}
			if f.garbage {
				rsp = []byte{2, 0, 0, 0, 0, 0, 0, 0, hit, hit}
			}
			pending = append(pending, rsp...)
			f.probes++
			f.maxAhead = max(f.maxAhead, len(pending)/9)
		case CmdGetTensor:
			off := binary.LittleEndian.Uint64(body[TensorSize:])
			size := binary.LittleEndian.Uint64(body[TensorSize+8:])
			if f.garbage {
				size++
			}
			rsp := binary.LittleEndian.AppendUint64(nil, size)
			got := make([]byte, size)
			copy(got, f.data[off])
			pending = append(pending, append(rsp, got...)...)
			f.gets++
		case CmdSetTensor:
			flag := body[TensorSize]
			off := binary.LittleEndian.Uint64(body[TensorSize+1:])
			f.sets[off] = flag
			if f.data != nil {
				f.data[off] = body[TensorSize+9:]
			}
			if flag == 1 {
				f.cache[hashOfOffset(off)] = true
			}
		}
		f.mu.Unlock()
		if len(pending) >= 4*9 {
			flush()
		}
	}
}

// hashOfOffset is the hash the test gives the bytes set at off: sets at
// offsets k and k+dup share their bytes.
func hashOfOffset(off uint64) uint64 { return 1 + off%dup }

const dup = 40 // offsets 0..39 are distinct, later ones repeat them

// tcpPair is a connected pair over loopback (buffered, unlike net.Pipe).
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// guardOn makes a guard whose one session is conn, with a buffer at base.
func guardOn(conn net.Conn) *Guard {
	g := &Guard{remote: "fake:1", ioTimeout: 5 * time.Second, answers: map[string][]byte{}, bases: map[uint64]bufferRef{},
		align: map[uint32]uint64{}, maxSize: map[uint32]uint64{}, total: map[uint32]uint64{}, ownSets: true}
	s := &rpcSession{buffers: map[uint64]rpcBuffer{}, server: conn}
	g.bases[1<<20] = bufferRef{s: s, handle: 7, size: 1 << 20}
	return g
}

// set is a one-byte-wide tensor of 64 KiB at base 1 MiB, set at offset
// off (each set writes 16 bytes).
func set(off uint64, probe bool, done func(bool, error)) *Set {
	x := &Set{Base: 1 << 20, Offset: off, Size: 16, Data: make([]byte, 16), Probe: probe, Done: done}
	binary.LittleEndian.PutUint32(x.Tensor[TensorType:], 24) // i8
	binary.LittleEndian.PutUint32(x.Tensor[TensorNe:], 1<<16)
	binary.LittleEndian.PutUint32(x.Tensor[TensorNb:], 1)
	for i := 1; i < 4; i++ {
		binary.LittleEndian.PutUint32(x.Tensor[TensorNe+4*i:], 1)
		binary.LittleEndian.PutUint32(x.Tensor[TensorNb+4*i:], 1<<16)
	}
	binary.LittleEndian.PutUint64(x.Tensor[TensorData:], 1<<20)
	x.Hash = func() uint64 { return hashOfOffset(off) }
	return x
}

// The guard's sets: probes go ahead of their replies, a miss is sent with
// the cache flag, a hit not at all, a probe for bytes whose data is still
// to be written waits for it (and then hits), and every Done is called
// once.
func TestSetsPipelineProbes(t *testing.T) {
	a, b := tcpPair(t)
	f := &fakeCache{conn: b, cache: map[uint64]bool{}, sets: map[uint64]byte{}}
	go f.serve()
	g := guardOn(a)
	const n = 120
	var mu sync.Mutex
	hits := map[uint64]bool{}
	calls := map[uint64]int{}
	var wg sync.WaitGroup
	for off := range uint64(n) {
		wg.Add(1)
		x := set(off, off%3 != 2, func(hit bool, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("set %d: %v", off, err)
			}
			mu.Lock()
			hits[off] = hit
			calls[off]++
			mu.Unlock()
		})
		if err := g.Send(x); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	// a set's Done comes once it is written: a read behind them all is
	// answered once the server has taken them
	wg.Add(1)
	last := set(0, false, func(_ bool, err error) {
		defer wg.Done()
		if err != nil {
			t.Errorf("the read behind the sets: %v", err)
		}
	})
	last.Get = true
	if err := g.Send(last); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for off := range uint64(n) {
		probed := off%3 != 2
		flag, sent := f.sets[off]
		switch {
		case calls[off] != 1:
			t.Fatalf("set %d: Done called %d times", off, calls[off])
		case !probed && (!sent || flag != 0 || hits[off]):
			t.Fatalf("set %d without a probe: sent %v flag %d hit %v", off, sent, flag, hits[off])
		case probed && off >= dup && f.sets[off%dup] == 1 && !hits[off]:
			t.Fatalf("set %d: its bytes were kept by the cache before (set %d), but it missed", off, off%dup)
		case probed && hits[off] && sent:
			t.Fatalf("set %d hit the cache and was sent", off)
		case probed && !hits[off] && (!sent || flag != 1):
			t.Fatalf("set %d missed and was not sent with the cache flag (sent %v, flag %d)", off, sent, flag)
		}
	}
	if f.maxAhead < 2 {
		t.Fatalf("at most %d probe written ahead of its reply", f.maxAhead)
	}
	t.Logf("%d probes, up to %d ahead of their replies", f.probes, f.maxAhead)
}

// A server that closes the connection, or answers with a reply of the
// wrong size, to probes and to reads: every request gets an error wrapping
// ErrFailed, once, but those answered before it broke, and the guard
// records the failure.
func TestSetsFail(t *testing.T) {
	for _, c := range []struct {
		name    string
		breakAt int
		garbage bool
		get     bool
	}{{"closed", 7, false, false}, {"garbage", 0, true, false}, {"read/closed", 4, false, true}, {"read/garbage", 0, true, true}} {
		t.Run(c.name, func(t *testing.T) {
			a, b := tcpPair(t)
			f := &fakeCache{conn: b, cache: map[uint64]bool{}, sets: map[uint64]byte{}, data: map[uint64][]byte{}, breakAt: c.breakAt, garbage: c.garbage}
			go f.serve()
			g := guardOn(a)
			var wg sync.WaitGroup
			var mu sync.Mutex
			failed := 0
			const n = 30
			for off := range uint64(n) {
				x := set(off, !c.get, func(hit bool, err error) {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						if !errors.Is(err, ErrFailed) {
							t.Errorf("request %d: %v does not wrap ErrFailed", off, err)
						}
						failed++
					}
				})
				x.Get = c.get
				wg.Add(1)
				if err := g.Send(x); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			answered := 0 // at most: the requests before the one that breaks
			if c.breakAt > 0 {
				answered = c.breakAt - 1
			}
			if failed < n-answered || g.Err() == nil {
				t.Fatalf("%d of %d failed, guard error %v", failed, n, g.Err())
			}
			t.Logf("%d of %d failed: %v", failed, n, g.Err())
		})
	}
}

// Send checks a set as the server would before anything is queued.
func TestSendChecks(t *testing.T) {
	a, _ := tcpPair(t)
	g := guardOn(a)
	nop := func(bool, error) { t.Error("Done called for a refused set") }
	for name, x := range map[string]*Set{
		"no buffer":   func() *Set { x := set(0, false, nop); x.Base = 5; return x }(),
		"past tensor": func() *Set { x := set(1<<16-8, false, nop); return x }(),
		"outside": func() *Set {
			x := set(0, false, nop)
			binary.LittleEndian.PutUint64(x.Tensor[TensorData:], 2<<20-100)
			return x
		}(),
		"short data": func() *Set { x := set(0, false, nop); x.Data = x.Data[:3]; return x }(),
		"bad type": func() *Set {
			x := set(0, false, nop)
			binary.LittleEndian.PutUint32(x.Tensor[TensorType:], 999)
			return x
		}(),
		"probe no hash":  func() *Set { x := set(0, true, nop); x.Hash = nil; return x }(),
		"read no memory": func() *Set { x := set(0, false, nop); x.Get, x.Data = true, nil; return x }(),
		"read probe":     func() *Set { x := set(0, true, nop); x.Get = true; return x }(),
		"read cache":     func() *Set { x := set(0, false, nop); x.Get, x.Cache = true, true; return x }(),
	} {
		if err := g.Send(x); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A probe whose bytes the cache already had, while a second copy of them
// waits behind it: the copy is asked once the first is answered (and hits
// too), nothing waits for good.
func TestSetsCopyOfAHit(t *testing.T) {
	a, b := tcpPair(t)
	f := &fakeCache{conn: b, cache: map[uint64]bool{hashOfOffset(0): true}, sets: map[uint64]byte{}}
	go f.serve()
	g := guardOn(a)
	var wg sync.WaitGroup
	var mu sync.Mutex
	hits := 0
	for _, off := range []uint64{0, dup, 2 * dup} {
		wg.Add(1)
		if err := g.Send(set(off, true, func(hit bool, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("set %d: %v", off, err)
			}
			if hit {
				mu.Lock()
				hits++
				mu.Unlock()
			}
		})); err != nil {
			t.Fatal(err)
		}
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("sets of a cached hash still waiting after 10s")
	}
	if hits != 3 {
		t.Fatalf("%d of 3 copies of cached bytes hit", hits)
	}
}
