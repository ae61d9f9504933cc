package ggml_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/ggload/ggload/ggml"
)

// Real failures of ggml calls: each error is a *ggml.Error that names the
// call and the device, buffer type, tensor and bytes it concerned, and
// wraps its sentinel. (The CPU buffer type belongs to no device in ggml:
// calls on it name none; a call on the CPU's backend names the CPU.)
func TestErrorsNameTheirPlace(t *testing.T) {
	rt := ownRuntime(t, ggml.Options{})
	cpu := rt.CPUDevice()
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 4, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	w, _ := ctx.NewTensor(ggml.TypeF32, 64, 2)
	x, _ := ctx.NewTensor(ggml.TypeF32, 32, 2)
	if err := w.SetName("w"); err != nil {
		t.Fatal(err)
	}
	buf, err := ctx.AllocTensors(rt.CPUBufferType())
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	be, err := cpu.NewBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free()
	huge, err := rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer huge.Free()
	if _, err := huge.NewTensor(ggml.TypeF32, 1<<30, 1<<28); err != nil {
		t.Fatal(err)
	}
	closed, err := ggml.Open(context.Background(), ggml.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	n := w.NBytes()
	eight := make([]byte, 8)

	type result struct {
		err      error
		want     ggml.Error // the place (Err not compared)
		sentinel error      // nil for none
	}
	cases := map[string]func() result{
		"unknown device": func() result {
			_, err := rt.DeviceByName("GPU42")
			return result{err, ggml.Error{Op: "dev_by_name", Device: "GPU42"}, ggml.ErrUnknownDevice}
		},
		"unknown buffer type": func() result {
			_, err := rt.BufferTypeByName("VRAM")
			return result{err, ggml.Error{Op: "buft_by_name", BufferType: "VRAM"}, ggml.ErrUnknownBufferType}
		},
		"buffer refused": func() result {
			_, err := rt.CPUBufferType().Alloc(1 << 60)
			return result{err, ggml.Error{Op: "buft_alloc_buffer", BufferType: "CPU", Size: 1 << 60}, ggml.ErrOutOfMemory}
		},
		"context's tensors refused": func() result {
			_, err := huge.AllocTensors(rt.CPUBufferType())
			return result{err, ggml.Error{Op: "alloc_ctx_tensors_from_buft", BufferType: "CPU", Size: huge.AllocSize(rt.CPUBufferType())}, ggml.ErrOutOfMemory}
		},
		"set past the end": func() result {
			return result{w.Set(eight, n), ggml.Error{Op: "tensor_set", BufferType: "CPU", Tensor: "w", Off: n, Size: 8}, nil}
		},
		"async set past the end": func() result {
			err := be.SetTensorAsync(w, unsafe.Pointer(&eight[0]), n-4, 8)
			return result{err, ggml.Error{Op: "tensor_set_async", Device: "CPU", BufferType: "CPU", Tensor: "w", Off: n - 4, Size: 8}, nil}
		},
		"op of mismatched rows": func() result {
			_, err := ctx.MulMat(w, x)
			return result{err, ggml.Error{Op: "mul_mat", BufferType: "CPU", Tensor: "w"}, nil}
		},
		"closed runtime": func() result {
			_, err := closed.NewContext(ggml.ContextParams{Tensors: 1})
			return result{err, ggml.Error{Op: "init"}, ggml.ErrClosed}
		},
		"malformed endpoint": func() result {
			return result{ggml.CheckRPCEndpoint("no-port"), ggml.Error{Op: "rpc_check_endpoint", Endpoint: "no-port"}, ggml.ErrRPCEndpoint}
		},
	}
	if vk, err := rt.DeviceByName("Vulkan0"); err == nil {
		vbe, err := vk.NewBackend()
		if err != nil {
			t.Fatal(err)
		}
		defer vbe.Free()
		// the call's device and the tensor's buffer type differ
		cases["async set through another device"] = func() result {
			err := vbe.SetTensorAsync(w, unsafe.Pointer(&eight[0]), 0, 8)
			return result{err, ggml.Error{Op: "tensor_set_async", Device: "Vulkan0", BufferType: "CPU", Tensor: "w", Size: 8}, nil}
		}
	} else {
		t.Log("no Vulkan0: the call on one device of a tensor on another is not tried")
	}
	check := func(name string, r result) {
		t.Helper()
		e, ok := r.err.(*ggml.Error)
		if !ok {
			t.Fatalf("%s: %v (%T) is no *ggml.Error", name, r.err, r.err)
		}
		got := *e
		got.Err = nil
		if got != r.want {
			t.Fatalf("%s: the place is %+v, want %+v: %v", name, got, r.want, r.err)
		}
		if r.sentinel != nil && !errors.Is(r.err, r.sentinel) {
			t.Fatalf("%s: %v does not wrap %q", name, r.err, r.sentinel)
		}
		t.Logf("%s: %v", name, r.err)
	}
	for name, c := range cases {
		check(name, c())
	}
	// last: the buffer freed under the tensor (no buffer type to name)
	buf.Free()
	_, err = w.Bytes()
	check("read of a freed buffer", result{err, ggml.Error{Op: "tensor_get", Tensor: "w", Size: n}, ggml.ErrClosed})
}

// --rpc's list: endpoints trimmed, empty items dropped, each checked; none
// at all, or a malformed one, an error that says so.
func TestParseRPCServers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  string
	}{
		{"127.0.0.1:50052", []string{"127.0.0.1:50052"}, ""},
		{" a:1 , ,[::1]:2,", []string{"a:1", "[::1]:2"}, ""},
		{"", nil, "no RPC servers named"},
		{" , ", nil, "no RPC servers named"},
		{"a:1,no-port", nil, "malformed rpc endpoint"},
		{"a:0", nil, "malformed rpc endpoint"},
	} {
		got, err := ggml.ParseRPCServers(c.in)
		if !slices.Equal(got, c.want) || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %q, %v; want %q, %q", c.in, got, err, c.want, c.err)
		}
	}
}
