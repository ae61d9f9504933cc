package rpc_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// dropRelay stands between clients and a ggml-rpc-server and, once armed,
// drops the first SET_TENSOR request above over bytes: the server never
// sees it, and since the request has no reply, the client cannot tell.
type dropRelay struct {
	Endpoint string
	target   string
	over     uint64
	armed    atomic.Bool
	dropped  atomic.Bool
	clears   atomic.Int64 // MEMSET_TENSOR requests passed on
}

func startDropRelay(t testing.TB, target string, over uint64) *dropRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &dropRelay{Endpoint: ln.Addr().String(), target: target, over: over}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return r
}

func (r *dropRelay) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { io.Copy(c, s); c.Close() }() // replies, as they are
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		n := binary.LittleEndian.Uint64(hdr[1:])
		if hdr[0] == 17 {
			r.clears.Add(1)
		}
		if hdr[0] == 6 && n > r.over && r.armed.Load() && r.dropped.CompareAndSwap(false, true) {
			if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
				return
			}
			continue
		}
		if _, err := s.Write(hdr); err != nil {
			return
		}
		if _, err := io.CopyN(s, c, int64(n)); err != nil {
			return
		}
	}
}

// Split mode tensor over two RPC servers, one of them behind a relay that
// drops one set of a slice: the guards' sets have no reply, so only the
// read-back of a window of every slice can tell. The load fails with an
// error wrapping ggml.ErrRPCFailed that names the endpoint; with the relay
// honest, the same load succeeds and confirms every sliced tensor.
func TestSplitTensorConfirms(t *testing.T) {
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	rt := testenv.Runtime(t)
	m := writeModel(t, rt, synth.Spec{Layers: 2, Embd: 1024, FF: 2816, Heads: 8, Vocab: 8000})
	a := testenv.StartRPCServer(t)
	b := testenv.StartRPCServer(t)
	relay := startDropRelay(t, b.Endpoint, 1<<20)
	var devs []string
	for _, ep := range []string{a.Endpoint, relay.Endpoint} {
		ds, err := rt.AddRPCServer(context.Background(), ep, ggml.RPCOptions{})
		if err != nil {
			t.Fatalf("%s: %v", ep, err)
		}
		devs = append(devs, ds[0].Name())
	}
	p, err := place.New(context.Background(), rt, m, place.Params{SplitMode: place.SplitTensor, DeviceNames: devs, TensorSplit: []float32{1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Load(context.Background(), p, loader.Options{HashIndex: "off"})
	if err != nil {
		t.Fatalf("load through the honest relay: %v", err)
	}
	if lm.Stats.Confirmed == 0 {
		t.Errorf("no tensor confirmed")
	}
	// the clears that learn where slices lie are kept from the servers:
	// every byte of them is set after
	if n := relay.clears.Load(); n != 0 {
		t.Errorf("%d clears reached the server", n)
	}
	if _, err := lm.Verify(); err != nil {
		t.Errorf("verify: %v", err)
	}
	lm.Close()

	// the armed load sets other bytes: a server may give back the
	// memory of the first load's buffer, which holds the first model's
	// (the guards keep from it the clears that would zero it first)
	m2 := writeModel(t, rt, synth.Spec{Layers: 2, Embd: 1024, FF: 2816, Heads: 8, Vocab: 8000, Seed: 2})
	p2, err := place.New(context.Background(), rt, m2, place.Params{SplitMode: place.SplitTensor, DeviceNames: devs, TensorSplit: []float32{1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	relay.armed.Store(true)
	lm, err = loader.Load(context.Background(), p2, loader.Options{HashIndex: "off"})
	if err == nil {
		lm.Close()
		t.Fatalf("load succeeded with a set dropped (%v)", relay.dropped.Load())
	}
	if !relay.dropped.Load() {
		t.Fatalf("no set dropped: %v", err)
	}
	if !errors.Is(err, ggml.ErrRPCFailed) || !strings.Contains(err.Error(), relay.Endpoint) || !strings.Contains(err.Error(), "holds other bytes") {
		t.Fatalf("error %v: want ErrRPCFailed naming %s and its bytes", err, relay.Endpoint)
	}
	t.Logf("failed: %v", err)
}
