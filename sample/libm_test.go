package sample

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/testenv"
)

// plainEnv, set in a child test process, makes the functions evaluate
// the C library's build without fused multiply-adds, the build that
// plainTunables makes glibc choose on a processor with FMA.
const (
	plainEnv      = "GGLOAD_LIBM_PLAIN"
	plainTunables = "glibc.cpu.hwcaps=-AVX2,-FMA"
)

// sameFloat reports whether a and b have the same bits or are both NaN.
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// libmEdges are float32 arguments where the functions take their special
// paths or change subinterval: zeros, infinities, NaNs, subnormals, every
// power of two, the limits of float32, and values around 1 and around
// the table's subinterval boundaries.
func libmEdges() []float32 {
	var bits []uint32
	for _, b := range []uint32{
		0, 1, 2, 3, 0x00400000, 0x007ffffe, 0x007fffff, 0x00800000, 0x00800001,
		0x7f7fffff, 0x7f800000, 0x7f800001, 0x7fbfffff, 0x7fc00000, 0x7fc00001, 0x7fffffff,
		0x3f800000, 0x3f7fffff, 0x3f800001, 0x3f000000, 0x40000000, 0x40490fdb, 0x402df854,
	} {
		bits = append(bits, b, b|0x80000000)
	}
	for e := uint32(1); e < 255; e++ {
		bits = append(bits, e<<23, e<<23|0x80000000)
	}
	for i := uint32(0); i < 24; i++ {
		bits = append(bits, 1<<i)
	}
	for d := uint32(0); d < 512; d++ {
		bits = append(bits, 0x3f800000+d, 0x3f800000-d)
	}
	for i := uint32(0); i < 16; i++ {
		b := logOff + i<<19
		for d := uint32(0); d < 4; d++ {
			bits = append(bits, b+d, b-d-1, b+d-23<<23, b-d-1+100<<23)
		}
	}
	xs := make([]float32, len(bits))
	for i, b := range bits {
		xs[i] = math.Float32frombits(b)
	}
	return xs
}

// TestLibmMatches holds expf, logf, log2f and powf to the C library's,
// bit for bit, over the edge arguments, 2^17 random float32 bit patterns
// and 2^17 arguments in the range the samplers use densely for each of
// the one-argument functions, and 2^18 pairs of eight kinds for powf
// (random bits, x in (0,1), integer y, negative x, large x, x near 1,
// subnormal x, roots of small integers) with the edge pairs.
//
// On an x86-64 processor with FMA and AVX2 it runs a second time, in a
// child process with glibc's FMA builds turned off, for the plain build.
// (Throwaway exhaustive runs on x86-64 with glibc 2.36 found no
// difference in either build over all 2^32 inputs of logf, log2f and
// expf, nor over 10^8 random pairs of powf.)
func TestLibmMatches(t *testing.T) {
	t.Parallel()
	m, err := llama.Libm()
	if err != nil {
		testenv.Missing(t, "llama", "the C library's libm: %v", err)
	}
	if os.Getenv(plainEnv) == "1" {
		fused = false
	}
	edges := libmEdges()
	r := rand.New(rand.NewPCG(1, 2))
	fail := 0
	check1 := func(name string, f, c func(float32) float32, x float32) {
		if got, want := f(x), c(x); !sameFloat(got, want) {
			t.Errorf("%s(%g [%08x]) = %g [%08x], libm %g [%08x]", name, x, math.Float32bits(x), got, math.Float32bits(got), want, math.Float32bits(want))
			if fail++; fail > 20 {
				t.FailNow()
			}
		}
	}
	for _, fn := range []struct {
		name  string
		f, c  func(float32) float32
		dense func() float32
	}{
		{"expf", expf, m.Expf, func() float32 { return -r.Float32() * 110 }},
		{"logf", logf, m.Logf, r.Float32},
		{"log2f", log2f, m.Log2f, r.Float32},
	} {
		for _, x := range edges {
			check1(fn.name, fn.f, fn.c, x)
		}
		for range 1 << 17 {
			check1(fn.name, fn.f, fn.c, math.Float32frombits(r.Uint32()))
			check1(fn.name, fn.f, fn.c, fn.dense())
		}
	}
	// where expf of the plain build and glibc's FMA build differ
	for _, b := range []uint32{0x4202422f, 0xc27c65d9} {
		check1("expf", expf, m.Expf, math.Float32frombits(b))
	}

	checkPow := func(x, y float32) {
		if isSignaling(math.Float32bits(x)) || isSignaling(math.Float32bits(y)) {
			// the binding passes float32 arguments through float64,
			// which quiets a signaling NaN
			return
		}
		if got, want := powf(x, y), m.Powf(x, y); !sameFloat(got, want) {
			t.Errorf("powf(%g [%08x], %g [%08x]) = %g [%08x], libm %g [%08x]", x, math.Float32bits(x), y, math.Float32bits(y), got, math.Float32bits(got), want, math.Float32bits(want))
			if fail++; fail > 20 {
				t.FailNow()
			}
		}
	}
	ys := []float32{
		0, 1, 2, 3, 0.5, 1.5, 2.5, 1e-10, 7, 8, 1 << 23, 1<<24 - 1, 1 << 24, 1 << 25, 1 << 31,
		0x1.000002p0, 0x1.fffffep-1, 126, 127, 128, 129, 149, 150, 151,
		float32(math.Inf(1)), float32(math.NaN()), math.Float32frombits(0x7f800001), math.MaxFloat32, math.SmallestNonzeroFloat32,
	}
	for _, y := range ys {
		for _, x := range edges {
			checkPow(x, y)
			checkPow(x, -y)
		}
	}
	for range 1 << 15 {
		checkPow(math.Float32frombits(r.Uint32()), math.Float32frombits(r.Uint32()))
		checkPow(r.Float32(), r.Float32()*8-4)
		checkPow(math.Float32frombits(r.Uint32()), float32(r.IntN(64)-32))
		checkPow(-r.Float32()*4, float32(r.IntN(400)-200))
		checkPow(r.Float32()*1000, r.Float32()*40-20)
		checkPow(1+(r.Float32()-0.5)*0x1p-10, float32(r.NormFloat64()*1e4))
		checkPow(math.Float32frombits(r.Uint32()&0x807fffff), r.Float32()*2-1)
		checkPow(float32(r.IntN(100)), 1/float32(1+r.IntN(10)))
	}
}

// TestLibmPlainBuild runs TestLibmMatches in a child process in which
// glibc uses its builds without fused multiply-adds, where this process's
// C library uses the fused ones.
func TestLibmPlainBuild(t *testing.T) {
	if os.Getenv(plainEnv) != "" {
		t.Skip("in the child process")
	}
	if runtime.GOARCH != "amd64" || !fused {
		t.Skip("the C library runs its plain builds already")
	}
	if _, err := llama.Libm(); err != nil {
		testenv.Missing(t, "llama", "the C library's libm: %v", err)
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLibmMatches$", "-test.count=1")
	cmd.Env = append(os.Environ(), plainEnv+"=1", "GLIBC_TUNABLES="+plainTunables)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("TestLibmMatches with %s: %v\n%s", plainTunables, err, out)
	}
}
