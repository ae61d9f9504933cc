package ops_test

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// clipEnv is the native graph API and a context of room tensors that the
// test frees.
func clipEnv(t *testing.T, room int) (*ops.Lib, *ops.Context) {
	t.Helper()
	lib := testenv.Runtime(t).Ops()
	c := lib.NewContext(uintptr(room) * lib.TensorOverhead())
	if c == nil {
		t.Fatal("no context")
	}
	t.Cleanup(func() { lib.Free(c) })
	return lib, c
}

// mk is a new tensor of the shape ne (its trailing ones dropped).
func mk(t *testing.T, lib *ops.Lib, c *ops.Context, typ int32, ne ...int64) *ops.Tensor {
	t.Helper()
	var s [4]int64
	for i := range s {
		s[i] = 1
	}
	copy(s[:], ne)
	x, err := lib.NewTensor(c, typ, len(ne), s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// room is how many more tensors the context holds.
func room(lib *ops.Lib, c *ops.Context) int {
	n := 0
	for lib.Room(c, n+1) {
		n++
	}
	return n
}

// The ops of the projectors' graphs make ggml's own tensors: their type,
// shape and op are ggml.c's (the formulas restated here), and each makes
// the number of tensors its room check counts.
func TestClipOpsShapes(t *testing.T) {
	lib, c := clipEnv(t, 512)
	f32, f16, i32 := int32(ops.TypeF32), int32(ops.TypeF16), int32(ops.TypeI32)
	out := func(n, k int64, s, p, d int64) int64 { return (n+2*p-d*(k-1)-1)/s + 1 }

	// a vision encoder's patch embedding: 3 channels of 28x28, patches of
	// 14, 32 channels out
	img := mk(t, lib, c, f32, 28, 28, 3, 1)
	patch := mk(t, lib, c, f16, 14, 14, 3, 32)
	// a 3x3 convolution with padding over a batch of two images
	img2 := mk(t, lib, c, f32, 16, 12, 3, 2)
	k3 := mk(t, lib, c, f16, 3, 3, 3, 8)
	// feature maps and depthwise kernels (one per channel)
	fm := mk(t, lib, c, f32, 20, 20, 8, 2)
	dw := mk(t, lib, c, f16, 3, 3, 1, 8)
	dw32 := mk(t, lib, c, f32, 3, 3, 1, 8)
	k3d := mk(t, lib, c, f32, 3, 3, 8, 16)
	// the same feature maps stored channels first ([C, W, H, N] permuted
	// to [W, H, C, N])
	cwhn := mk(t, lib, c, f32, 8, 20, 20, 2)
	fmCF, err := lib.Permute(c, cwhn, [4]int64{2, 0, 1, 3})
	if err != nil {
		t.Fatal(err)
	}
	// audio: 100 frames of 80 mel bins, kernels of 3 to 64 channels, and a
	// depthwise kernel of 5 over 64 channels
	mel := mk(t, lib, c, f32, 100, 80, 1)
	k1 := mk(t, lib, c, f16, 3, 80, 64)
	seq := mk(t, lib, c, f32, 100, 64, 1)
	dw1 := mk(t, lib, c, f16, 5, 1, 64)
	seqF16 := mk(t, lib, c, f16, 100, 64, 1)
	cols := mk(t, lib, c, f32, 64, 10)
	grid := mk(t, lib, c, f32, 16, 16, 32, 1)
	tok := mk(t, lib, c, f32, 32, 14, 14, 1)
	wins := mk(t, lib, c, f32, 32, 8, 8, 4)
	x := mk(t, lib, c, f32, 10, 6, 4, 1)
	gate := mk(t, lib, c, f32, 16, 4)

	cases := []struct {
		name  string
		build func() (*ops.Tensor, error)
		typ   int32
		ne    [4]int64
		op    string // ggml_op_name of the result
		count int    // the tensors the call makes
	}{
		{"conv_2d patch embedding", func() (*ops.Tensor, error) { return lib.Conv2D(c, patch, img, 14, 14, 0, 0, 1, 1) },
			f32, [4]int64{out(28, 14, 14, 0, 1), out(28, 14, 14, 0, 1), 32, 1}, "CONT", 7},
		{"conv_2d 3x3 padded, batch of 2", func() (*ops.Tensor, error) { return lib.Conv2D(c, k3, img2, 1, 1, 1, 1, 1, 1) },
			f32, [4]int64{16, 12, 8, 2}, "CONT", 7},
		{"conv_2d strided, dilated", func() (*ops.Tensor, error) { return lib.Conv2D(c, k3, img2, 2, 1, 0, 2, 1, 2) },
			f32, [4]int64{out(16, 3, 2, 0, 1), out(12, 3, 1, 2, 2), 8, 2}, "CONT", 7},
		{"conv_2d_direct", func() (*ops.Tensor, error) { return lib.Conv2DDirect(c, k3d, fm, 2, 2, 1, 1, 1, 1) },
			f32, [4]int64{out(20, 3, 2, 1, 1), out(20, 3, 2, 1, 1), 16, 2}, "CONV_2D", 1},
		{"conv_2d_dw", func() (*ops.Tensor, error) { return lib.Conv2DDw(c, dw, fm, 1, 1, 1, 1, 1, 1) },
			f32, [4]int64{20, 20, 8, 2}, "RESHAPE", 7},
		{"conv_2d_dw_direct", func() (*ops.Tensor, error) { return lib.Conv2DDwDirect(c, dw32, fm, 2, 2, 1, 1, 1, 1) },
			f32, [4]int64{10, 10, 8, 2}, "CONV_2D_DW", 1},
		{"conv_2d_dw_direct channels first", func() (*ops.Tensor, error) { return lib.Conv2DDwDirect(c, dw32, fmCF, 1, 1, 1, 1, 1, 1) },
			f32, [4]int64{20, 20, 8, 2}, "CONV_2D_DW", 1},
		{"im2col 2D", func() (*ops.Tensor, error) { return lib.Im2Col(c, patch, img, 14, 14, 0, 0, 1, 1, true, f16) },
			f16, [4]int64{14 * 14 * 3, 2, 2, 1}, "IM2COL", 1},
		{"im2col 1D", func() (*ops.Tensor, error) { return lib.Im2Col(c, k1, mel, 1, 0, 1, 0, 1, 0, false, f32) },
			f32, [4]int64{3 * 80, 100, 1, 1}, "IM2COL", 1},
		{"conv_1d", func() (*ops.Tensor, error) { return lib.Conv1D(c, k1, mel, 1, 1, 1) },
			f32, [4]int64{100, 64, 1, 1}, "RESHAPE", 5},
		{"conv_1d strided", func() (*ops.Tensor, error) { return lib.Conv1D(c, k1, mel, 2, 1, 1) },
			f32, [4]int64{out(100, 3, 2, 1, 1), 64, 1, 1}, "RESHAPE", 5},
		{"conv_1d_dw", func() (*ops.Tensor, error) { return lib.Conv1DDw(c, dw1, seq, 1, 2, 1) },
			f32, [4]int64{100, 64, 1, 1}, "RESHAPE", 4},
		{"conv_1d_dw unpadded", func() (*ops.Tensor, error) { return lib.Conv1DDw(c, dw1, seq, 1, 0, 1) },
			f32, [4]int64{96, 64, 1, 1}, "RESHAPE", 4},
		{"col2im_1d", func() (*ops.Tensor, error) { return lib.Col2Im1D(c, cols, 2, 16, 1) },
			f32, [4]int64{(10-1)*2 + 4 - 2, 16, 1, 1}, "COL2IM_1D", 1},
		{"pool_1d avg", func() (*ops.Tensor, error) { return lib.Pool1D(c, seq, ops.PoolAvg, 2, 2, 0) },
			f32, [4]int64{50, 64, 1, 1}, "POOL_1D", 1},
		{"pool_1d max of F16", func() (*ops.Tensor, error) { return lib.Pool1D(c, seqF16, ops.PoolMax, 3, 1, 1) },
			f32, [4]int64{100, 64, 1, 1}, "POOL_1D", 1},
		{"pad_reflect_1d", func() (*ops.Tensor, error) { return lib.PadReflect1D(c, seq, 3, 4) },
			f32, [4]int64{107, 64, 1, 1}, "PAD_REFLECT_1D", 1},
		{"roll", func() (*ops.Tensor, error) { return lib.Roll(c, x, [4]int32{2, -1, 3, 0}) },
			f32, x.Ne, "ROLL", 1},
		{"interpolate bilinear, corners aligned", func() (*ops.Tensor, error) {
			return lib.Interpolate(c, grid, [4]int64{24, 24, 32, 1}, ops.ScaleBilinear|ops.ScaleAlignCorners)
		}, f32, [4]int64{24, 24, 32, 1}, "UPSCALE", 1},
		{"interpolate bilinear antialiased", func() (*ops.Tensor, error) {
			return lib.Interpolate(c, grid, [4]int64{8, 8, 32, 1}, ops.ScaleBilinear|ops.ScaleAntialias)
		}, f32, [4]int64{8, 8, 32, 1}, "UPSCALE", 1},
		{"interpolate nearest", func() (*ops.Tensor, error) { return lib.Interpolate(c, grid, [4]int64{8, 8, 32, 1}, ops.ScaleNearest) },
			f32, [4]int64{8, 8, 32, 1}, "UPSCALE", 1},
		{"interpolate bicubic", func() (*ops.Tensor, error) {
			return lib.Interpolate(c, grid, [4]int64{20, 12, 32, 1}, ops.ScaleBicubic)
		},
			f32, [4]int64{20, 12, 32, 1}, "UPSCALE", 1},
		{"upscale", func() (*ops.Tensor, error) { return lib.Upscale(c, grid, 2, ops.ScaleNearest) },
			f32, [4]int64{32, 32, 32, 1}, "UPSCALE", 1},
		{"win_part", func() (*ops.Tensor, error) { return lib.WinPart(c, tok, 8) },
			f32, [4]int64{32, 8, 8, 4}, "WIN_PART", 1},
		{"win_unpart", func() (*ops.Tensor, error) { return lib.WinUnpart(c, wins, 14, 14, 8) },
			f32, [4]int64{32, 14, 14, 1}, "WIN_UNPART", 1},
		{"argsort", func() (*ops.Tensor, error) { return lib.Argsort(c, x, ops.SortDesc) }, i32, x.Ne, "ARGSORT", 1},
		{"sum", func() (*ops.Tensor, error) { return lib.Sum(c, x) }, f32, [4]int64{1, 1, 1, 1}, "SUM", 1},
		{"sin", func() (*ops.Tensor, error) { return lib.Sin(c, x) }, f32, x.Ne, "SIN", 1},
		{"cos", func() (*ops.Tensor, error) { return lib.Cos(c, x) }, f32, x.Ne, "COS", 1},
		{"log", func() (*ops.Tensor, error) { return lib.Log(c, x) }, f32, x.Ne, "LOG", 1},
		{"step", func() (*ops.Tensor, error) { return lib.Step(c, x) }, f32, x.Ne, "UNARY", 1},
		{"elu", func() (*ops.Tensor, error) { return lib.Elu(c, x) }, f32, x.Ne, "UNARY", 1},
		{"gelu_erf", func() (*ops.Tensor, error) { return lib.GeluErf(c, x) }, f32, x.Ne, "UNARY", 1},
		{"gelu_quick", func() (*ops.Tensor, error) { return lib.GeluQuick(c, x) }, f32, x.Ne, "UNARY", 1},
		{"hardswish", func() (*ops.Tensor, error) { return lib.Hardswish(c, x) }, f32, x.Ne, "UNARY", 1},
		{"hardsigmoid", func() (*ops.Tensor, error) { return lib.Hardsigmoid(c, x) }, f32, x.Ne, "UNARY", 1},
		{"gelu_inplace", func() (*ops.Tensor, error) { return lib.GeluInplace(c, x) }, f32, x.Ne, "UNARY", 1},
		{"relu_inplace", func() (*ops.Tensor, error) { return lib.ReluInplace(c, x) }, f32, x.Ne, "UNARY", 1},
		{"swiglu_swapped", func() (*ops.Tensor, error) { return lib.SwigluSwapped(c, gate) }, f32, [4]int64{8, 4, 1, 1}, "GLU", 1},
		{"geglu_quick_split", func() (*ops.Tensor, error) { return lib.GegluQuickSplit(c, gate, gate) }, f32, gate.Ne, "GLU", 1},
		{"geglu_erf_split", func() (*ops.Tensor, error) { return lib.GegluErfSplit(c, gate, gate) }, f32, gate.Ne, "GLU", 1},
	}
	for _, tc := range cases {
		before := room(lib, c)
		r, err := tc.build()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if made := before - room(lib, c); made != tc.count {
			t.Errorf("%s: made %d tensors, its room check counts %d", tc.name, made, tc.count)
		}
		if r.Type != tc.typ || r.Ne != tc.ne {
			t.Errorf("%s: %s %v, want %s %v", tc.name, lib.TypeName(r.Type), r.Ne, lib.TypeName(tc.typ), tc.ne)
		}
		if got := lib.OpName(r.Op); got != tc.op {
			t.Errorf("%s: op %s, want %s", tc.name, got, tc.op)
		}
	}
	// the in-place ops are views of their argument
	for _, f := range []func(*ops.Context, *ops.Tensor) (*ops.Tensor, error){lib.GeluInplace, lib.ReluInplace} {
		r, err := f(c, x)
		if err != nil || r.ViewSrc == nil || (*ops.Tensor)(r.ViewSrc) != x {
			t.Errorf("an in-place op is not a view of its argument (%v)", err)
		}
	}
	// over channels-first data the depthwise result is laid out channels
	// first too
	r, err := lib.Conv2DDwDirect(c, dw32, fmCF, 1, 1, 1, 1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Nb[2] != 4 || r.Nb[0] != 8*4 || r.Nb[1] != 20*8*4 {
		t.Errorf("channels-first depthwise result: nb %v", r.Nb)
	}
}

// Arguments that would make ggml assert (or divide by zero) are an
// *AssertError naming ggml's condition, and nothing is made.
func TestClipOpsAsserts(t *testing.T) {
	lib, c := clipEnv(t, 256)
	f32, f16 := int32(ops.TypeF32), int32(ops.TypeF16)
	img := mk(t, lib, c, f32, 28, 28, 3, 1)
	patch := mk(t, lib, c, f16, 14, 14, 3, 32)
	small := mk(t, lib, c, f32, 4, 4, 3, 1)
	gray := mk(t, lib, c, f32, 28, 28, 1, 1)
	patchT, err := lib.Transpose(c, patch)
	if err != nil {
		t.Fatal(err)
	}
	fm := mk(t, lib, c, f32, 20, 20, 8, 2)
	dw := mk(t, lib, c, f16, 3, 3, 1, 8)
	dwBad := mk(t, lib, c, f32, 3, 3, 2, 8)
	seq := mk(t, lib, c, f32, 100, 48, 1)
	dw1 := mk(t, lib, c, f16, 5, 1, 64)
	short := mk(t, lib, c, f32, 4, 2)
	cols := mk(t, lib, c, f32, 63, 10)
	grid16 := mk(t, lib, c, f16, 8, 8, 4)
	grid := mk(t, lib, c, f32, 8, 8, 4)
	tok := mk(t, lib, c, f32, 32, 14, 14, 1)
	x := mk(t, lib, c, f32, 4, 6)
	xT, err := lib.Transpose(c, x)
	if err != nil {
		t.Fatal(err)
	}
	wide := mk(t, lib, c, f32, 6, 6)

	cases := []struct {
		name  string
		build func() (*ops.Tensor, error)
		cond  string
	}{
		{"conv_2d channels differ", func() (*ops.Tensor, error) { return lib.Conv2D(c, patch, gray, 14, 14, 0, 0, 1, 1) }, "a->ne[2] == b->ne[2]"},
		{"conv_2d stride 0", func() (*ops.Tensor, error) { return lib.Conv2D(c, patch, img, 0, 14, 0, 0, 1, 1) }, "s0 != 0"},
		{"conv_2d image under the kernel", func() (*ops.Tensor, error) { return lib.Conv2D(c, patch, small, 1, 1, 0, 0, 1, 1) }, "OH > 0"},
		{"conv_2d kernel not contiguous", func() (*ops.Tensor, error) { return lib.Conv2D(c, patchT, img, 14, 14, 0, 0, 1, 1) }, "ggml_is_contiguous(a)"},
		{"conv_2d_dw a channel per kernel", func() (*ops.Tensor, error) { return lib.Conv2DDw(c, dw, seq, 1, 1, 1, 1, 1, 1) }, "ggml_can_mul_mat"},
		{"conv_2d_dw_direct kernels of 2", func() (*ops.Tensor, error) { return lib.Conv2DDwDirect(c, dwBad, fm, 1, 1, 1, 1, 1, 1) }, "a->ne[2] == 1"},
		{"conv_2d_direct stride 0", func() (*ops.Tensor, error) { return lib.Conv2DDirect(c, patch, img, 1, 0, 0, 0, 1, 1) }, "s1 != 0"},
		{"conv_1d_dw channels", func() (*ops.Tensor, error) { return lib.Conv1DDw(c, dw1, seq, 1, 2, 1) }, "ggml_can_mul_mat"},
		{"conv_1d channels", func() (*ops.Tensor, error) { return lib.Conv1D(c, dw1, seq, 1, 1, 1) }, "b->ne[1] == a->ne[1]"},
		{"im2col type", func() (*ops.Tensor, error) { return lib.Im2Col(c, patch, img, 14, 14, 0, 0, 1, 1, true, 99) }, "GGML_TYPE_COUNT"},
		{"col2im_1d blocks", func() (*ops.Tensor, error) { return lib.Col2Im1D(c, cols, 2, 16, 0) }, "K_OC == K * oc"},
		{"col2im_1d stride", func() (*ops.Tensor, error) { return lib.Col2Im1D(c, cols, 0, 16, 0) }, "s0 > 0"},
		{"pool_1d window over the input", func() (*ops.Tensor, error) { return lib.Pool1D(c, short, ops.PoolAvg, 8, 1, 0) }, "ne[0] > 0"},
		{"pool_1d stride 0", func() (*ops.Tensor, error) { return lib.Pool1D(c, short, ops.PoolAvg, 2, 0, 0) }, "ne[0] > 0"},
		{"pad_reflect_1d too wide", func() (*ops.Tensor, error) { return lib.PadReflect1D(c, short, 4, 0) }, "p0 < a->ne[0]"},
		{"roll too far", func() (*ops.Tensor, error) { return lib.Roll(c, x, [4]int32{0, -6, 0, 0}) }, "abs(shift1) < a->ne[1]"},
		{"roll of a transposed tensor", func() (*ops.Tensor, error) { return lib.Roll(c, xT, [4]int32{1, 0, 0, 0}) }, "a->nb[0] == ggml_type_size(a->type)"},
		{"interpolate F16", func() (*ops.Tensor, error) {
			return lib.Interpolate(c, grid16, [4]int64{16, 16, 4, 1}, ops.ScaleNearest)
		}, "a->type == GGML_TYPE_F32"},
		{"interpolate mode", func() (*ops.Tensor, error) { return lib.Interpolate(c, grid, [4]int64{16, 16, 4, 1}, 3) }, "GGML_SCALE_MODE_COUNT"},
		{"interpolate antialiased nearest", func() (*ops.Tensor, error) {
			return lib.Interpolate(c, grid, [4]int64{4, 4, 4, 1}, ops.ScaleNearest|ops.ScaleAntialias)
		}, "GGML_SCALE_FLAG_ANTIALIAS"},
		{"upscale by 1", func() (*ops.Tensor, error) { return lib.Upscale(c, grid, 1, ops.ScaleNearest) }, "scale_factor > 1"},
		{"win_part of 0", func() (*ops.Tensor, error) { return lib.WinPart(c, tok, 0) }, "w > 0"},
		{"win_unpart F16", func() (*ops.Tensor, error) { return lib.WinUnpart(c, grid16, 8, 8, 4) }, "a->type == GGML_TYPE_F32"},
		{"gelu_quick of columns", func() (*ops.Tensor, error) { return lib.GeluQuick(c, xT) }, "ggml_is_contiguous_rows(a)"},
		{"relu_inplace of columns", func() (*ops.Tensor, error) { return lib.ReluInplace(c, xT) }, "ggml_is_contiguous_rows(a)"},
		{"geglu_erf_split shapes", func() (*ops.Tensor, error) { return lib.GegluErfSplit(c, x, wide) }, "ggml_are_same_shape(a, b)"},
		{"swiglu_swapped of columns", func() (*ops.Tensor, error) { return lib.SwigluSwapped(c, xT) }, "ggml_is_contiguous_1(a)"},
	}
	for _, tc := range cases {
		before := room(lib, c)
		r, err := tc.build()
		var ae *ops.AssertError
		if !errors.As(err, &ae) || r != nil {
			t.Errorf("%s: %v, %v; want an assert", tc.name, r, err)
			continue
		}
		if !strings.Contains(ae.Cond, tc.cond) {
			t.Errorf("%s: %q, want %q", tc.name, ae.Cond, tc.cond)
		}
		if after := room(lib, c); after != before {
			t.Errorf("%s: %d tensors made before the refusal", tc.name, before-after)
		}
	}
}

// A convolution that makes several tensors checks the room for all of them
// before it makes any.
func TestClipOpsRoom(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		conv func(lib *ops.Lib, c *ops.Context, a, b *ops.Tensor) (*ops.Tensor, error)
		a, b [4]int64
	}{
		{"conv_2d", 7, func(lib *ops.Lib, c *ops.Context, a, b *ops.Tensor) (*ops.Tensor, error) {
			return lib.Conv2D(c, a, b, 2, 2, 0, 0, 1, 1)
		}, [4]int64{2, 2, 3, 4}, [4]int64{8, 8, 3, 1}},
		{"conv_2d_dw", 7, func(lib *ops.Lib, c *ops.Context, a, b *ops.Tensor) (*ops.Tensor, error) {
			return lib.Conv2DDw(c, a, b, 1, 1, 1, 1, 1, 1)
		}, [4]int64{3, 3, 1, 4}, [4]int64{8, 8, 4, 1}},
		{"conv_1d", 5, func(lib *ops.Lib, c *ops.Context, a, b *ops.Tensor) (*ops.Tensor, error) {
			return lib.Conv1D(c, a, b, 1, 1, 1)
		}, [4]int64{3, 4, 6, 1}, [4]int64{10, 4, 1, 1}},
		{"conv_1d_dw", 4, func(lib *ops.Lib, c *ops.Context, a, b *ops.Tensor) (*ops.Tensor, error) {
			return lib.Conv1DDw(c, a, b, 1, 1, 1)
		}, [4]int64{3, 1, 4, 1}, [4]int64{10, 4, 1, 1}},
	} {
		for _, extra := range []int{tc.n - 1, tc.n} {
			lib, c := clipEnv(t, 2+extra)
			a := mk(t, lib, c, ops.TypeF16, tc.a[:]...)
			b := mk(t, lib, c, ops.TypeF32, tc.b[:]...)
			r, err := tc.conv(lib, c, a, b)
			var ae *ops.AssertError
			switch {
			case extra < tc.n && (!errors.As(err, &ae) || !strings.Contains(ae.Cond, "obj_new") || room(lib, c) != extra):
				t.Errorf("%s with room for %d: %v, %v", tc.name, extra, r, err)
			case extra == tc.n && (err != nil || room(lib, c) != 0):
				t.Errorf("%s with room for %d: %v (room left %d)", tc.name, extra, err, room(lib, c))
			}
		}
	}
}

// compute runs the graph of out on the CPU backend with the inputs' data
// and returns out's data; c's tensors can be computed again after it.
func compute(t *testing.T, lib *ops.Lib, c *ops.Context, out *ops.Tensor, in map[*ops.Tensor][]float32) []byte {
	t.Helper()
	gc := lib.NewContext(lib.GraphOverheadCustom(64, false))
	if gc == nil {
		t.Fatal("no graph context")
	}
	defer lib.Free(gc)
	g := lib.NewGraph(gc, 64)
	if err := lib.Expand(g, out); err != nil {
		t.Fatal(err)
	}
	be := lib.BackendInit(lib.DevByType(ops.DevTypeCPU))
	if be == 0 {
		t.Fatal("no CPU backend")
	}
	defer lib.BackendFree(be)
	s := lib.SchedNew([]ops.Backend{be}, []ops.Buft{lib.BackendDefaultBuft(be)}, 64, false, false)
	if s == 0 {
		t.Fatal("no scheduler")
	}
	defer lib.SchedFree(s)
	// the tensors leave the compute buffer with it, for the next graph
	defer lib.Unallocate(c)
	for x := range in {
		lib.SetInput(x)
	}
	if !lib.SchedAllocGraph(s, g) {
		t.Fatal("graph not allocated")
	}
	for x, v := range in {
		buf := make([]byte, 0, 4*len(v))
		switch x.Type {
		case ops.TypeF32:
			for _, f := range v {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
			}
		case ops.TypeF16:
			for _, f := range v {
				buf = binary.LittleEndian.AppendUint16(buf, f16bits(f))
			}
		default:
			t.Fatalf("input of type %d", x.Type)
		}
		lib.TensorSet(x, buf, 0)
	}
	if st := lib.SchedGraphCompute(s, g); st != 0 {
		t.Fatalf("compute: status %d", st)
	}
	n := ops.NElements(out) * int64(lib.TypeSize(out.Type))
	data := make([]byte, n)
	lib.TensorGet(out, data, 0)
	return data
}

// f16bits is the half-precision encoding of a small integer or half (the
// values the tests use, all exact in F16).
func f16bits(f float32) uint16 {
	if f == 0 {
		return 0
	}
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	return sign | uint16(exp)<<10 | uint16((b>>13)&0x3ff)
}

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// ramp is n values cycling through small integers from -3 to 3.
func ramp(n int64, k int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32((i*k)%7 - 3)
	}
	return out
}

func near(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol*(1+math.Abs(float64(b[i]))) {
			return false
		}
	}
	return true
}

// The convolutions, pooling and the other ops compute on the CPU what a
// direct Go reference computes.
func TestClipOpsValues(t *testing.T) {
	f32, f16 := int32(ops.TypeF32), int32(ops.TypeF16)

	t.Run("conv_2d patch embedding", func(t *testing.T) {
		lib, c := clipEnv(t, 64)
		// 3 channels of 6x4, patches of 2, 4 channels out
		const W, H, IC, OC, P = 6, 4, 3, 4, 2
		img, kern := mk(t, lib, c, f32, W, H, IC, 1), mk(t, lib, c, f16, P, P, IC, OC)
		iv, kv := ramp(W*H*IC, 5), ramp(P*P*IC*OC, 3)
		r, err := lib.Conv2D(c, kern, img, P, P, 0, 0, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := floats(compute(t, lib, c, r, map[*ops.Tensor][]float32{img: iv, kern: kv}))
		var want []float32
		for oc := 0; oc < OC; oc++ {
			for oy := 0; oy < H/P; oy++ {
				for ox := 0; ox < W/P; ox++ {
					var s float32
					for ic := 0; ic < IC; ic++ {
						for ky := 0; ky < P; ky++ {
							for kx := 0; kx < P; kx++ {
								s += kv[((oc*IC+ic)*P+ky)*P+kx] * iv[(ic*H+oy*P+ky)*W+ox*P+kx]
							}
						}
					}
					want = append(want, s)
				}
			}
		}
		if !near(got, want, 1e-3) {
			t.Errorf("conv_2d: %v, want %v", got, want)
		}
	})

	t.Run("conv_2d_dw and its direct form", func(t *testing.T) {
		lib, c := clipEnv(t, 64)
		const W, H, C, K = 5, 4, 3, 3
		img, kern := mk(t, lib, c, f32, W, H, C, 1), mk(t, lib, c, f16, K, K, 1, C)
		iv, kv := ramp(W*H*C, 2), ramp(K*K*C, 4)
		want := make([]float32, 0, W*H*C)
		for ch := 0; ch < C; ch++ {
			for oy := 0; oy < H; oy++ {
				for ox := 0; ox < W; ox++ {
					var s float32
					for ky := 0; ky < K; ky++ {
						for kx := 0; kx < K; kx++ {
							x, y := ox+kx-1, oy+ky-1
							if x >= 0 && x < W && y >= 0 && y < H {
								s += kv[(ch*K+ky)*K+kx] * iv[(ch*H+y)*W+x]
							}
						}
					}
					want = append(want, s)
				}
			}
		}
		r, err := lib.Conv2DDw(c, kern, img, 1, 1, 1, 1, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := floats(compute(t, lib, c, r, map[*ops.Tensor][]float32{img: iv, kern: kv})); !near(got, want, 1e-3) {
			t.Errorf("conv_2d_dw: %v, want %v", got, want)
		}
		lib2, c2 := clipEnv(t, 64)
		img2, kern2 := mk(t, lib2, c2, f32, W, H, C, 1), mk(t, lib2, c2, f32, K, K, 1, C)
		r2, err := lib2.Conv2DDwDirect(c2, kern2, img2, 1, 1, 1, 1, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := floats(compute(t, lib2, c2, r2, map[*ops.Tensor][]float32{img2: iv, kern2: kv})); !near(got, want, 1e-4) {
			t.Errorf("conv_2d_dw_direct: %v, want %v", got, want)
		}
	})

	t.Run("conv_1d and conv_1d_dw", func(t *testing.T) {
		lib, c := clipEnv(t, 64)
		const L, IC, OC, K = 8, 2, 3, 3
		sig, kern := mk(t, lib, c, f32, L, IC, 1), mk(t, lib, c, f16, K, IC, OC)
		sv, kv := ramp(L*IC, 3), ramp(K*IC*OC, 2)
		r, err := lib.Conv1D(c, kern, sig, 1, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		var want []float32
		for oc := 0; oc < OC; oc++ {
			for o := 0; o < L; o++ {
				var s float32
				for ic := 0; ic < IC; ic++ {
					for k := 0; k < K; k++ {
						if x := o + k - 1; x >= 0 && x < L {
							s += kv[(oc*IC+ic)*K+k] * sv[ic*L+x]
						}
					}
				}
				want = append(want, s)
			}
		}
		if got := floats(compute(t, lib, c, r, map[*ops.Tensor][]float32{sig: sv, kern: kv})); !near(got, want, 1e-3) {
			t.Errorf("conv_1d: %v, want %v", got, want)
		}

		lib2, c2 := clipEnv(t, 64)
		sig2, dk := mk(t, lib2, c2, f32, L, IC, 1), mk(t, lib2, c2, f16, K, 1, IC)
		dv := ramp(K*IC, 5)
		r2, err := lib2.Conv1DDw(c2, dk, sig2, 1, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		want = want[:0]
		for ch := 0; ch < IC; ch++ {
			for o := 0; o < L; o++ {
				var s float32
				for k := 0; k < K; k++ {
					if x := o + k - 1; x >= 0 && x < L {
						s += dv[ch*K+k] * sv[ch*L+x]
					}
				}
				want = append(want, s)
			}
		}
		if got := floats(compute(t, lib2, c2, r2, map[*ops.Tensor][]float32{sig2: sv, dk: dv})); !near(got, want, 1e-3) {
			t.Errorf("conv_1d_dw: %v, want %v", got, want)
		}
	})

	t.Run("pool_1d, pad_reflect_1d, roll, sum, argsort, unary", func(t *testing.T) {
		lib, c := clipEnv(t, 64)
		x := mk(t, lib, c, f32, 6, 2)
		xv := []float32{1, -2, 3, 0.5, -1, 2, 4, 0, -3, 1, 2, -0.5}
		check := func(name string, r *ops.Tensor, err error, want []float32) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := floats(compute(t, lib, c, r, map[*ops.Tensor][]float32{x: xv})); !near(got, want, 1e-5) {
				t.Errorf("%s: %v, want %v", name, got, want)
			}
		}
		r, err := lib.Pool1D(c, x, ops.PoolAvg, 2, 2, 0)
		check("pool_1d avg", r, err, []float32{-0.5, 1.75, 0.5, 2, -1, 0.75})
		r, err = lib.Pool1D(c, x, ops.PoolMax, 3, 3, 0)
		check("pool_1d max", r, err, []float32{3, 2, 4, 2})
		r, err = lib.PadReflect1D(c, x, 2, 1)
		check("pad_reflect_1d", r, err, []float32{3, -2, 1, -2, 3, 0.5, -1, 2, -1, -3, 0, 4, 0, -3, 1, 2, -0.5, 2})
		r, err = lib.Roll(c, x, [4]int32{2, 1, 0, 0})
		check("roll", r, err, []float32{2, -0.5, 4, 0, -3, 1, -1, 2, 1, -2, 3, 0.5})
		r, err = lib.Sum(c, x)
		check("sum", r, err, []float32{7})
		r, err = lib.Step(c, x)
		check("step", r, err, []float32{1, 0, 1, 1, 0, 1, 1, 0, 0, 1, 1, 0})
		r, err = lib.Hardsigmoid(c, x)
		hs := make([]float32, len(xv))
		for i, v := range xv {
			hs[i] = float32(math.Min(1, math.Max(0, float64(v+3)/6)))
		}
		check("hardsigmoid", r, err, hs)

		lib2, c2 := clipEnv(t, 64)
		y := mk(t, lib2, c2, f32, 6, 2)
		a, err := lib2.Argsort(c2, y, ops.SortAsc)
		if err != nil {
			t.Fatal(err)
		}
		raw := compute(t, lib2, c2, a, map[*ops.Tensor][]float32{y: xv})
		var idx []int32
		for i := 0; i < len(raw); i += 4 {
			idx = append(idx, int32(binary.LittleEndian.Uint32(raw[i:])))
		}
		want := []int32{1, 4, 3, 0, 5, 2, 2, 5, 1, 3, 4, 0}
		for i := range want {
			if idx[i] != want[i] {
				t.Fatalf("argsort: %v, want %v", idx, want)
			}
		}
	})

	t.Run("win_part and win_unpart", func(t *testing.T) {
		lib, c := clipEnv(t, 64)
		const C, W, H, w = 2, 5, 3, 2
		x := mk(t, lib, c, f32, C, W, H, 1)
		xv := ramp(C*W*H, 1)
		for i := range xv {
			xv[i] = float32(i)
		}
		p, err := lib.WinPart(c, x, w)
		if err != nil {
			t.Fatal(err)
		}
		u, err := lib.WinUnpart(c, p, W, H, w)
		if err != nil {
			t.Fatal(err)
		}
		if got := floats(compute(t, lib, c, u, map[*ops.Tensor][]float32{x: xv})); !near(got, xv, 0) {
			t.Errorf("win_unpart(win_part(x)): %v, want %v", got, xv)
		}
	})

	t.Run("interpolate nearest is upscale", func(t *testing.T) {
		lib, c := clipEnv(t, 64)
		x := mk(t, lib, c, f32, 3, 2, 2)
		xv := ramp(12, 1)
		r, err := lib.Interpolate(c, x, [4]int64{6, 4, 2, 1}, ops.ScaleNearest)
		if err != nil {
			t.Fatal(err)
		}
		var want []float32
		for ch := 0; ch < 2; ch++ {
			for y := 0; y < 4; y++ {
				for xx := 0; xx < 6; xx++ {
					want = append(want, xv[(ch*2+y/2)*3+xx/2])
				}
			}
		}
		if got := floats(compute(t, lib, c, r, map[*ops.Tensor][]float32{x: xv})); !near(got, want, 0) {
			t.Errorf("interpolate nearest: %v, want %v", got, want)
		}
		lib2, c2 := clipEnv(t, 64)
		x2 := mk(t, lib2, c2, f32, 3, 2, 2)
		u, err := lib2.Upscale(c2, x2, 2, ops.ScaleNearest)
		if err != nil {
			t.Fatal(err)
		}
		if got := floats(compute(t, lib2, c2, u, map[*ops.Tensor][]float32{x2: xv})); !near(got, want, 0) {
			t.Errorf("upscale: %v, want %v", got, want)
		}
	})
}
