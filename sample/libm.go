// Port of glibc's expf, logf, log2f and powf, as llama.cpp
// src/llama-sampler.cpp (v0.5.0) calls them.

package sample

import (
	"math"
	"math/big"
	"runtime"

	"golang.org/x/sys/cpu"
)

// The samplers of llama.cpp call the C library's single-precision expf,
// logf, log2f and powf, and glibc's versions of these are not correctly
// rounded. The functions below evaluate glibc's own algorithms (ARM's
// optimized-routines: a table lookup reducing the argument, a short
// polynomial in float64, one rounding to float32) operation for
// operation, so that they return glibc's results for every input.
//
// glibc builds each of these functions twice on x86-64 and picks one when
// the process starts: where the processor has FMA and AVX2 it runs a build
// in which the compiler fused every a*b+c of the C source into one fused
// multiply-add, elsewhere a build with a separate multiply and add. The
// two builds disagree on a few inputs (of expf, two of the 2^32; of powf,
// about one pair in 5*10^7), so muladd follows the build that the C
// library of this machine runs.

// fused reports whether the C library evaluates a*b+c as one fused
// multiply-add in these functions.
var fused = libmFused()

func libmFused() bool {
	switch runtime.GOARCH {
	case "amd64":
		// glibc's ifunc selector: FMA and AVX2, both usable
		return cpu.X86.HasFMA && cpu.X86.HasAVX2
	case "arm64", "ppc64le", "riscv64", "s390x":
		// built by a compiler that contracts a*b+c where the base ISA
		// has a fused multiply-add (on arm64 and s390x glibc's expf and
		// powf also round k with a conversion instruction, which the
		// functions below do not follow)
		return true
	}
	return false
}

// muladd is a*b+c as the C library's build evaluates it. (Elsewhere, a
// product that feeds a sum is converted to float64 first, which keeps the
// compiler from fusing the two.)
func muladd(a, b, c float64) float64 {
	if fused {
		return math.FMA(a, b, c)
	}
	return float64(a*b) + c
}

const (
	expTableBits = 5
	expN         = 1 << expTableBits
)

// exp2Table holds the bits of 2^(i/32) less i<<47, so that adding k<<47
// to entry k%32 gives the bits of 2^(k/32) for any integer k in range.
var exp2Table [expN]uint64

// the cubic of glibc's expf and powf for 2^r-1, unscaled and scaled for a
// reduced argument r in units of 1/32
const (
	exp2C0 = 0x1.c6af84b912394p-5
	exp2C1 = 0x1.ebfce50fac4f3p-3
	exp2C2 = 0x1.62e42ff0c52d6p-1

	expC0 = exp2C0 / expN / expN / expN
	expC1 = exp2C1 / expN / expN
	expC2 = exp2C2 / expN

	invLn2N  = 0x1.71547652b82fep+0 * expN
	expShift = 0x1.8p+52
)

func init() {
	// 2^(i/32) correctly rounded, from repeated square roots of 2 in
	// 200-bit precision
	const prec = 200
	root := new(big.Float).SetPrec(prec).SetInt64(2)
	for i := 0; i < expTableBits; i++ {
		root.Sqrt(root)
	}
	v := new(big.Float).SetPrec(prec).SetInt64(1)
	for i := 0; i < expN; i++ {
		f, _ := v.Float64()
		exp2Table[i] = math.Float64bits(f) - uint64(i)<<(52-expTableBits)
		v.Mul(v, root)
	}
}

// xflowf is glibc's result for an overflow (y = 0x1p97), a certain
// underflow (0x1p-95) or a possible underflow (0x1.4p-75): y*y with the
// sign of the result.
func xflowf(neg bool, y float32) float32 {
	if neg {
		return -y * y
	}
	return y * y
}

// invalidf is glibc's NaN for an argument outside the domain.
func invalidf(x float32) float32 {
	d := x - x
	return d / d
}

// expf is glibc's expf (ARM optimized-routines): x*32/ln2 = k + r, and
// exp(x) = 2^(k/32) * 2^(r/32) with a cubic for 2^(r/32).
func expf(x float32) float32 {
	xd := float64(x)
	abstop := math.Float32bits(x) >> 20 & 0x7ff
	if abstop >= math.Float32bits(88.0)>>20 {
		// |x| >= 88 or x is NaN
		if math.Float32bits(x) == math.Float32bits(float32(math.Inf(-1))) {
			return 0
		}
		if abstop >= 0x7f8 {
			return x + x
		}
		if x > 0x1.62e42ep6 {
			return xflowf(false, 0x1p97)
		}
		if x < -0x1.9fe368p6 {
			return xflowf(false, 0x1p-95)
		}
		if x < -0x1.9d1d9ep6 {
			return xflowf(false, 0x1.4p-75)
		}
	}
	// The fused build folds z = invLn2N*xd into both of its uses.
	var kd, r float64
	if fused {
		kd = math.FMA(invLn2N, xd, expShift)
		ki := math.Float64bits(kd)
		kd -= expShift
		r = math.FMA(invLn2N, xd, -kd)
		return expfTail(r, ki)
	}
	z := float64(invLn2N * xd)
	kd = z + expShift
	ki := math.Float64bits(kd)
	kd -= expShift
	r = z - kd
	return expfTail(r, ki)
}

// expfTail is the end of expf: 2^(k/32) * 2^(r/32) for ki's low bits k.
func expfTail(r float64, ki uint64) float32 {
	s := math.Float64frombits(exp2Table[ki%expN] + ki<<(52-expTableBits))
	z := muladd(expC0, r, expC1)
	r2 := r * r
	y := muladd(expC2, r, 1)
	y = muladd(z, r2, y)
	return float32(y * s)
}

// exp64 is glibc's exp for temp-ext's float64 softmax; math.Exp agrees
// with it to within an ulp of float64, and the results are rounded to
// float32.
func exp64(x float64) float64 { return math.Exp(x) }

// logOff is the bits of 0x1.66p-1: logf, log2f and powf write x as 2^k*z
// with z in [logOff, 2*logOff), split into 16 subintervals.
const logOff = 0x3f330000

// logTable is 1/c and ln(c) for a c near the middle of each of the 16
// subintervals of [0x1.66p-1, 0x1.66p+0), from glibc's logf data.
var logTable = [16][2]float64{
	{0x1.661ec79f8f3bep+0, -0x1.57bf7808caadep-2},
	{0x1.571ed4aaf883dp+0, -0x1.2bef0a7c06ddbp-2},
	{0x1.49539f0f010bp+0, -0x1.01eae7f513a67p-2},
	{0x1.3c995b0b80385p+0, -0x1.b31d8a68224e9p-3},
	{0x1.30d190c8864a5p+0, -0x1.6574f0ac07758p-3},
	{0x1.25e227b0b8eap+0, -0x1.1aa2bc79c81p-3},
	{0x1.1bb4a4a1a343fp+0, -0x1.a4e76ce8c0e5ep-4},
	{0x1.12358f08ae5bap+0, -0x1.1973c5a611cccp-4},
	{0x1.0953f419900a7p+0, -0x1.252f438e10c1ep-5},
	{0x1p+0, 0x0p+0},
	{0x1.e608cfd9a47acp-1, 0x1.aa5aa5df25984p-5},
	{0x1.ca4b31f026aap-1, 0x1.c5e53aa362eb4p-4},
	{0x1.b2036576afce6p-1, 0x1.526e57720db08p-3},
	{0x1.9c2d163a1aa2dp-1, 0x1.bc2860d22477p-3},
	{0x1.886e6037841edp-1, 0x1.1058bc8a07ee1p-2},
	{0x1.767dcf5534862p-1, 0x1.4043057b6ee09p-2},
}

// log2Table is 1/c and log2(c) for the same c, from glibc's log2f and
// powf data.
var log2Table = [16][2]float64{
	{0x1.661ec79f8f3bep+0, -0x1.efec65b963019p-2},
	{0x1.571ed4aaf883dp+0, -0x1.b0b6832d4fca4p-2},
	{0x1.49539f0f010bp+0, -0x1.7418b0a1fb77bp-2},
	{0x1.3c995b0b80385p+0, -0x1.39de91a6dcf7bp-2},
	{0x1.30d190c8864a5p+0, -0x1.01d9bf3f2b631p-2},
	{0x1.25e227b0b8eap+0, -0x1.97c1d1b3b7afp-3},
	{0x1.1bb4a4a1a343fp+0, -0x1.2f9e393af3c9fp-3},
	{0x1.12358f08ae5bap+0, -0x1.960cbbf788d5cp-4},
	{0x1.0953f419900a7p+0, -0x1.a6f9db6475fcep-5},
	{0x1p+0, 0x0p+0},
	{0x1.e608cfd9a47acp-1, 0x1.338ca9f24f53dp-4},
	{0x1.ca4b31f026aap-1, 0x1.476a9543891bap-3},
	{0x1.b2036576afce6p-1, 0x1.e840b4ac4e4d2p-3},
	{0x1.9c2d163a1aa2dp-1, 0x1.40645f0c6651cp-2},
	{0x1.886e6037841edp-1, 0x1.88e9c2c1b9ff8p-2},
	{0x1.767dcf5534862p-1, 0x1.ce0a44eb17bccp-2},
}

// the polynomials, less their linear term, of logf for log1p(r) and of
// log2f for log1p(r)/ln2
const (
	logLn2 = 0x1.62e42fefa39efp-1
	logA0  = -0x1.00ea348b88334p-2
	logA1  = 0x1.5575b0be00b6ap-2
	logA2  = -0x1.ffffef20a4123p-2

	log2A0 = -0x1.712b6f70a7e4dp-2
	log2A1 = 0x1.ecabf496832ep-2
	log2A2 = -0x1.715479ffae3dep-1
	log2A3 = 0x1.715475f35c8b8p0
)

// logReduce writes the bits ix of a positive normal float32 as 2^k * z
// with z in [logOff, 2*logOff), and names z's subinterval i.
func logReduce(ix uint32) (z float64, k int32, i uint32) {
	tmp := ix - logOff
	i = (tmp >> (23 - 4)) % 16
	k = int32(tmp) >> 23
	z = float64(math.Float32frombits(ix - tmp&0xff800000))
	return z, k, i
}

// logNormal returns the bits of x, made normal: a subnormal x is scaled
// by 2^23 and its exponent field lowered by 23 (below zero, wrapping).
func logNormal(x float32) uint32 {
	return math.Float32bits(x*0x1p23) - 23<<23
}

// logf is glibc's logf (ARM optimized-routines): ln(x) = k*ln2 + ln(c) +
// log1p(z/c-1), with a table for c and a quartic for log1p.
func logf(x float32) float32 {
	ix := math.Float32bits(x)
	if ix == 0x3f800000 {
		return 0
	}
	if ix-0x00800000 >= 0x7f800000-0x00800000 {
		// x is below 2^-126, infinite or NaN
		switch {
		case ix*2 == 0:
			return float32(math.Inf(-1))
		case ix == 0x7f800000:
			return x
		case ix&0x80000000 != 0 || ix*2 >= 0xff000000:
			return invalidf(x)
		}
		ix = logNormal(x)
	}
	z, k, i := logReduce(ix)
	invc, logc := logTable[i][0], logTable[i][1]
	r := muladd(z, invc, -1)
	y0 := muladd(float64(k), logLn2, logc)
	r2 := r * r
	y := muladd(logA1, r, logA2)
	y = muladd(logA0, r2, y)
	y = muladd(y, r2, y0+r)
	return float32(y)
}

// log2f is glibc's log2f (ARM optimized-routines), logf's method with
// log2(c) in the table and a quartic for log1p(r)/ln2.
func log2f(x float32) float32 {
	ix := math.Float32bits(x)
	if ix == 0x3f800000 {
		return 0
	}
	if ix-0x00800000 >= 0x7f800000-0x00800000 {
		// x is below 2^-126, infinite or NaN
		switch {
		case ix*2 == 0:
			return float32(math.Inf(-1))
		case ix == 0x7f800000:
			return x
		case ix&0x80000000 != 0 || ix*2 >= 0xff000000:
			return invalidf(x)
		}
		ix = logNormal(x)
	}
	z, k, i := logReduce(ix)
	invc, logc := log2Table[i][0], log2Table[i][1]
	r := muladd(z, invc, -1)
	y0 := logc + float64(k)
	r2 := r * r
	y := muladd(log2A1, r, log2A2)
	y = muladd(log2A0, r2, y)
	p := muladd(log2A3, r, y0)
	y = muladd(y, r2, p)
	return float32(y)
}

// the quintic of powf for log1p(r)/ln2
const (
	powA0 = 0x1.27616c9496e0bp-2
	powA1 = -0x1.71969a075c67ap-2
	powA2 = 0x1.ec70a6ca7baddp-2
	powA3 = -0x1.7154748bef6c8p-1
	powA4 = 0x1.71547652ab82bp0
)

// powSignBias, added to the exponent bits of 2^(k/32), flips the sign of
// powf's result.
const powSignBias = 1 << (expTableBits + 11)

// powLog2 is log2 of the float32 with bits ix, in float64 (powf's
// log2_inline); ix may carry an exponent field below zero.
func powLog2(ix uint32) float64 {
	tmp := ix - logOff
	i := (tmp >> (23 - 4)) % 16
	top := tmp & 0xff800000
	k := int32(top) >> 23
	z := float64(math.Float32frombits(ix - top))
	invc, logc := log2Table[i][0], log2Table[i][1]
	r := muladd(z, invc, -1)
	y0 := logc + float64(k)
	r2 := r * r
	y := muladd(powA0, r, powA1)
	p := muladd(powA2, r, powA3)
	r4 := r2 * r2
	q := muladd(powA4, r, y0)
	q = muladd(p, r2, q)
	y = muladd(y, r4, q)
	return y
}

// powExp2 is 2^xd for xd in [-150, 128], its sign flipped by signBias
// (powf's exp2_inline).
func powExp2(xd float64, signBias uint64) float64 {
	const shift = expShift / expN
	kd := xd + shift
	ki := math.Float64bits(kd)
	kd -= shift
	r := xd - kd
	t := exp2Table[ki%expN] + (ki+signBias)<<(52-expTableBits)
	s := math.Float64frombits(t)
	z := muladd(exp2C0, r, exp2C1)
	r2 := r * r
	y := muladd(exp2C2, r, 1)
	y = muladd(z, r2, y)
	return y * s
}

// powCheckInt classifies the bits of a non-zero finite float32: 0 if it is
// not an integer, 1 if it is an odd one, 2 if an even one.
func powCheckInt(iy uint32) int {
	e := iy >> 23 & 0xff
	switch {
	case e < 0x7f:
		return 0
	case e > 0x7f+23:
		return 2
	case iy&(1<<(0x7f+23-e)-1) != 0:
		return 0
	case iy&(1<<(0x7f+23-e)) != 0:
		return 1
	}
	return 2
}

// zeroInfNaN reports whether the float32 with bits ix is ±0, ±Inf or NaN.
func zeroInfNaN(ix uint32) bool {
	return 2*ix-1 >= 2*0x7f800000-1
}

// isSignaling reports whether the float32 with bits ix is a signaling NaN.
func isSignaling(ix uint32) bool {
	return 2*(ix^0x00400000) > 2*0x7fc00000
}

// powf is glibc's powf (ARM optimized-routines): x^y = 2^(y*log2(x)),
// with log2 from a table and a quintic and 2^ from expf's table and
// cubic, both in float64; a negative x takes an integer y's sign.
func powf(x, y float32) float32 {
	var signBias uint64
	ix, iy := math.Float32bits(x), math.Float32bits(y)
	if ix-0x00800000 >= 0x7f800000-0x00800000 || zeroInfNaN(iy) {
		// x is below 2^-126 (or negative), infinite or NaN, or y is
		// zero, infinite or NaN
		if zeroInfNaN(iy) {
			switch {
			case 2*iy == 0:
				if isSignaling(ix) {
					return x + y
				}
				return 1
			case ix == 0x3f800000:
				if isSignaling(iy) {
					return x + y
				}
				return 1
			case 2*ix > 2*0x7f800000 || 2*iy > 2*0x7f800000:
				return x + y
			case 2*ix == 2*0x3f800000:
				return 1
			case (2*ix < 2*0x3f800000) == (iy&0x80000000 == 0):
				// |x| < 1 and y = +Inf, or |x| > 1 and y = -Inf
				return 0
			}
			return y * y
		}
		if zeroInfNaN(ix) {
			x2 := x * x
			if ix&0x80000000 != 0 && powCheckInt(iy) == 1 {
				x2 = -x2
			}
			if iy&0x80000000 != 0 {
				return 1 / x2
			}
			return x2
		}
		// x and y are finite and not zero
		if ix&0x80000000 != 0 {
			switch powCheckInt(iy) {
			case 0:
				return invalidf(x)
			case 1:
				signBias = powSignBias
			}
			ix &= 0x7fffffff
		}
		if ix < 0x00800000 {
			// x is subnormal
			ix = math.Float32bits(x*0x1p23)&0x7fffffff - 23<<23
		}
	}
	ylogx := float64(float64(y) * powLog2(ix))
	if math.Float64bits(ylogx)>>47&0xffff >= math.Float64bits(126.0)>>47 {
		// |y*log2(x)| >= 126
		if ylogx > 0x1.fffffffd1d571p+6 {
			return xflowf(signBias != 0, 0x1p97)
		}
		// (glibc's next check, for a result that rounds up to
		// 0x1p128 in an upward rounding mode, never holds in
		// round-to-nearest)
		if ylogx <= -150.0 {
			return xflowf(signBias != 0, 0x1p-95)
		}
		if ylogx < -149.0 {
			return xflowf(signBias != 0, 0x1.4p-75)
		}
	}
	return float32(powExp2(ylogx, signBias))
}
