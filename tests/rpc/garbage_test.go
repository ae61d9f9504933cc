package rpc_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// rpcReplies tells which commands of protocol 7 have a reply.
var rpcReplies = map[byte]bool{0: true, 1: true, 2: true, 3: true, 7: true, 8: true, 9: true, 11: true, 13: true, 14: true, 15: true}

var rpcNames = []string{"ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE", "FREE_BUFFER", "BUFFER_CLEAR", "SET_TENSOR", "SET_TENSOR_HASH",
	"GET_TENSOR", "COPY_TENSOR", "GRAPH_COMPUTE", "GET_DEVICE_MEMORY", "INIT_TENSOR", "GET_ALLOC_SIZE", "HELLO", "DEVICE_COUNT", "GRAPH_RECOMPUTE", "MEMSET_TENSOR"}

// garbageRelay stands between clients and a ggml-rpc-server. It keeps the
// protocol's framing (a reply is its u64 size, then that many bytes) but,
// on every connection, replaces the payload of each reply after the first
// k with random bytes (k < 0: never).
type garbageRelay struct {
	Endpoint string
	ln       net.Listener
	target   string
	k        int
	spare    int // connections relayed honestly first (the registration's probe)
	seed     uint64
	honest   atomic.Bool // from now on, relay every reply as it is
	loaded   [][]string  // the connections when the load returned

	mu      sync.Mutex
	conns   [][]string // per connection: the commands answered, "*" marking garbage
	garbage int
}

func startGarbageRelay(t testing.TB, target string, k, spare int, seed uint64) *garbageRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &garbageRelay{Endpoint: ln.Addr().String(), ln: ln, target: target, k: k, spare: spare, seed: seed}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, nil)
			id := len(r.conns) - 1
			r.mu.Unlock()
			go r.serve(c, id)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return r
}

func (r *garbageRelay) serve(c net.Conn, id int) {
	defer c.Close()
	s, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(r.seed, uint64(id)))
	hdr := make([]byte, 9)
	answered := 0
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		if _, err := s.Write(hdr); err != nil {
			return
		}
		if _, err := io.CopyN(s, c, int64(binary.LittleEndian.Uint64(hdr[1:]))); err != nil {
			return
		}
		if !rpcReplies[hdr[0]] {
			continue
		}
		var rh [8]byte
		if _, err := io.ReadFull(s, rh[:]); err != nil {
			return
		}
		if _, err := c.Write(rh[:]); err != nil {
			return
		}
		n := int64(binary.LittleEndian.Uint64(rh[:]))
		name := rpcNames[hdr[0]]
		if r.k < 0 || answered < r.k || id < r.spare || r.honest.Load() {
			if _, err := io.CopyN(c, s, n); err != nil {
				return
			}
		} else {
			if _, err := io.CopyN(io.Discard, s, n); err != nil {
				return
			}
			junk := make([]byte, n)
			for i := range junk {
				junk[i] = byte(rng.Uint32())
			}
			if _, err := c.Write(junk); err != nil {
				return
			}
			name += "*"
			r.mu.Lock()
			r.garbage++
			r.mu.Unlock()
		}
		answered++
		r.mu.Lock()
		r.conns[id] = append(r.conns[id], name)
		r.mu.Unlock()
	}
}

// stats are the relay's connections and the garbage replies it sent.
func (r *garbageRelay) stats() (conns [][]string, garbage int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		conns = append(conns, append([]string(nil), c...))
	}
	return conns, r.garbage
}

// garbageSpec has an output matrix over the client's 10 MiB hash threshold,
// so that a load asks SET_TENSOR_HASH too.
// and rows of 768 columns, which the client sizes with GET_ALLOC_SIZE (not
// a multiple of 512).
var garbageSpec = synth.Spec{Layers: 2, Embd: 768, FF: 1536, Heads: 6, Vocab: 14000, Weights: ggml.TypeQ4_K, Embeddings: ggml.TypeQ8_0}

// An RPC server whose replies turn to garbage after the first k of each
// connection, for many k: ggload ends each load with an error (wrapping
// ggml.ErrRPCFailed and naming the endpoint, or, when the handshake itself
// is garbage, ErrRPCUnreachable), never with a native abort and never with
// a success whose weights the server does not hold. A success is allowed
// only when the load's weights read back whole and equal to the file. The
// loads run in a child process, so that an abort fails the test.
func TestGarbageReplies(t *testing.T) {
	if !testenv.IsChild() {
		out := testenv.InChild(t, nil)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "garbage:") {
				t.Log(strings.TrimSpace(l))
			}
		}
		return
	}
	rt := testenv.Runtime(t)
	srv := testenv.StartRPCServer(t)
	m := writeModel(t, rt, garbageSpec)
	seed := uint64(time.Now().UnixNano())
	t.Logf("garbage: seed %d", seed)

	run := func(k, spare int, mode place.LoadMode) (err error, relay *garbageRelay, stage string) {
		relay = startGarbageRelay(t, srv.Endpoint, k, spare, seed+uint64(k))
		buffers, goroutines := testenv.LiveBuffers(), runtime.NumGoroutine()
		defer func() {
			if n := testenv.LiveBuffers(); n != buffers {
				t.Fatalf("k=%d: %d buffers live after the load, %d before", k, n, buffers)
			}
			if n := settle(goroutines + 2); n > goroutines+2 {
				t.Fatalf("k=%d: %d goroutines after the load, %d before", k, n, goroutines)
			}
		}()
		devs, err := rt.AddRPCServer(context.Background(), relay.Endpoint, ggml.RPCOptions{Timeout: 3 * time.Second, IOTimeout: 3 * time.Second})
		if err != nil {
			return err, relay, "register"
		}
		params := place.Params{}
		params.LoadMode = mode
		params.DeviceNames = []string{devs[0].Name()}
		p, err := place.New(context.Background(), rt, m, params)
		if err != nil {
			return err, relay, "plan"
		}
		if err := devs[0].Err(); err != nil {
			return err, relay, "plan"
		}
		lm, err := loader.Load(context.Background(), p, loader.Options{})
		if err != nil {
			return err, relay, "load"
		}
		defer lm.Close()
		relay.loaded, _ = relay.stats()
		// read everything back through a relay that lies no more: the
		// server must hold every weight
		relay.honest.Store(true)
		v, verr := lm.Verify()
		if verr != nil || v.ByDevice[devs[0].Name()] == 0 {
			t.Fatalf("k=%d, %s: the load succeeded but the weights are not on the server (%+v): %v", k, mode, v, verr)
		}
		if err := devs[0].Err(); err != nil {
			t.Fatalf("k=%d, %s: the load succeeded with the device failed: %v", k, mode, err)
		}
		return nil, relay, "loaded"
	}

	// a relay that never lies: the load succeeds; the replies of its
	// busiest connection are counted
	err, ref, _ := run(-1, 0, place.LoadNone)
	if err != nil {
		t.Fatalf("through an honest relay: %v", err)
	}
	most := 0
	for _, c := range ref.loaded {
		most = max(most, len(c))
	}
	t.Logf("garbage: an honest load: %d connections, %d replies on the busiest: %v", len(ref.loaded), most, ref.loaded)

	// garbage from the k-th reply of every connection on, for every k up
	// to past the busiest connection's count: a load that met garbage
	// must fail
	failed, loaded := 0, 0
	type try struct {
		k, spare int
		mode     place.LoadMode
	}
	var tries []try
	for k := 0; k <= most+2; k++ {
		tries = append(tries, try{k, 0, place.LoadNone}, try{k, 0, place.LoadMmap})
	}
	// and with the registration's probe spared, so that the native
	// client's own handshake, device count, memory, alignment, maximum
	// size, allocation sizes and allocations meet garbage
	for k := range 3 {
		tries = append(tries, try{k, 1, place.LoadNone}, try{k, 1, place.LoadMmap})
	}
	// and each connection of a load in turn lying from its second reply
	for spare := 2; spare < len(ref.loaded); spare++ {
		tries = append(tries, try{1, spare, place.LoadNone})
	}
	for _, try := range tries {
		{
			k, mode := try.k, try.mode
			err, relay, stage := run(k, try.spare, mode)
			if _, perr := ggml.ProbeRPC(context.Background(), srv.Endpoint); perr != nil {
				t.Fatalf("k=%d, spare=%d, %s: the ggml-rpc-server behind the relay is gone (%v) after: %v\n%s", k, try.spare, mode, perr, err, srv.Output())
			}
			_, garbage := relay.stats()
			// garbage replies met during the load; a memory query's
			// garbage can pass for an answer (free ≤ total) and harms
			// nothing
			met, harmless := 0, 0
			for _, c := range relay.loaded {
				for _, r := range c {
					if strings.HasSuffix(r, "*") {
						met++
						if r == "GET_DEVICE_MEMORY*" {
							harmless++
						}
					}
				}
			}
			if err == nil {
				if met > harmless || (k < most && try.spare == 0) {
					t.Fatalf("k=%d, %s: the load succeeded through %d garbage replies: %v", k, mode, met, relay.loaded)
				}
				loaded++
				t.Logf("garbage: k=%-3d spare=%d %-4s loaded; garbage met: %d memory queries (%d garbage replies in all, the rest to the verification after it, relayed honestly)", k, try.spare, mode, harmless, garbage)
				continue
			}
			failed++
			if !errors.Is(err, ggml.ErrRPCFailed) && !errors.Is(err, ggml.ErrRPCUnreachable) {
				t.Fatalf("k=%d, %s, %s: the error is not an RPC failure: %v", k, mode, stage, err)
			}
			if !strings.Contains(err.Error(), relay.Endpoint) {
				t.Fatalf("k=%d: the error does not name the endpoint %s: %v", k, relay.Endpoint, err)
			}
			// the command, the read-back that found other bytes, or the
			// handshake of the registration
			named := strings.Contains(err.Error(), "holds other bytes") || strings.Contains(err.Error(), "handshake") ||
				strings.Contains(err.Error(), "speaks RPC protocol") || strings.Contains(err.Error(), "device count")
			for _, n := range rpcNames {
				named = named || strings.Contains(err.Error(), n)
			}
			if !named {
				t.Fatalf("k=%d: the error names no command: %v", k, err)
			}
			t.Logf("garbage: k=%-3d spare=%d %-4s %-8s failed cleanly: %v", k, try.spare, mode, stage, err)
		}
	}
	if failed == 0 || loaded == 0 {
		t.Fatalf("%d loads failed, %d loaded: the relay is not doing its job", failed, loaded)
	}
	t.Logf("garbage: %d loads through garbage failed cleanly, %d loads that met none succeeded", failed, loaded)
}
