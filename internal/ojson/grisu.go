package ojson

// The float digits nlohmann's dump writes: Florian Loitsch's Grisu2, as
// nlohmann's detail::dtoa_impl implements it (vendor/nlohmann/json.hpp of
// the pin). Grisu2's digits round-trip and are nearly always the shortest;
// where they are not, they are still the ones nlohmann writes, which is why
// this is a port and not strconv.

import (
	"math"
	"math/bits"
)

type diyfp struct {
	f uint64
	e int
}

func (x diyfp) sub(y diyfp) diyfp { return diyfp{x.f - y.f, x.e} }

// mul is x × y rounded to the upper 64 bits, ties up.
func (x diyfp) mul(y diyfp) diyfp {
	uLo, uHi := x.f&0xFFFFFFFF, x.f>>32
	vLo, vHi := y.f&0xFFFFFFFF, y.f>>32
	p0, p1, p2, p3 := uLo*vLo, uLo*vHi, uHi*vLo, uHi*vHi
	q := p0>>32 + p1&0xFFFFFFFF + p2&0xFFFFFFFF
	q += 1 << 31
	h := p3 + p2>>32 + p1>>32 + q>>32
	return diyfp{h, x.e + y.e + 64}
}

func (x diyfp) normalize() diyfp {
	s := bits.LeadingZeros64(x.f)
	return diyfp{x.f << s, x.e - s}
}

func (x diyfp) normalizeTo(e int) diyfp { return diyfp{x.f << (x.e - e), e} }

// boundaries are v and its two neighbours' midpoints, normalized.
func boundaries(v float64) (w, minus, plus diyfp) {
	const precision = 53
	const bias = 1024 - 1 + (precision - 1)
	const minExp = 1 - bias
	const hidden = uint64(1) << (precision - 1)
	b := math.Float64bits(v)
	e := b >> (precision - 1)
	f := b & (hidden - 1)
	var x diyfp
	if e == 0 {
		x = diyfp{f, minExp}
	} else {
		x = diyfp{f + hidden, int(e) - bias}
	}
	lowerCloser := f == 0 && e > 1
	mPlus := diyfp{2*x.f + 1, x.e - 1}
	var mMinus diyfp
	if lowerCloser {
		mMinus = diyfp{4*x.f - 1, x.e - 2}
	} else {
		mMinus = diyfp{2*x.f - 1, x.e - 1}
	}
	plus = mPlus.normalize()
	return x.normalize(), mMinus.normalizeTo(plus.e), plus
}

const (
	kAlpha = -60
	kGamma = -32
)

type cachedPower struct {
	f uint64
	e int
	k int
}

var cachedPowers = [79]cachedPower{
	{0xAB70FE17C79AC6CA, -1060, -300}, {0xFF77B1FCBEBCDC4F, -1034, -292},
	{0xBE5691EF416BD60C, -1007, -284}, {0x8DD01FAD907FFC3C, -980, -276},
	{0xD3515C2831559A83, -954, -268}, {0x9D71AC8FADA6C9B5, -927, -260},
	{0xEA9C227723EE8BCB, -901, -252}, {0xAECC49914078536D, -874, -244},
	{0x823C12795DB6CE57, -847, -236}, {0xC21094364DFB5637, -821, -228},
	{0x9096EA6F3848984F, -794, -220}, {0xD77485CB25823AC7, -768, -212},
	{0xA086CFCD97BF97F4, -741, -204}, {0xEF340A98172AACE5, -715, -196},
	{0xB23867FB2A35B28E, -688, -188}, {0x84C8D4DFD2C63F3B, -661, -180},
	{0xC5DD44271AD3CDBA, -635, -172}, {0x936B9FCEBB25C996, -608, -164},
	{0xDBAC6C247D62A584, -582, -156}, {0xA3AB66580D5FDAF6, -555, -148},
	{0xF3E2F893DEC3F126, -529, -140}, {0xB5B5ADA8AAFF80B8, -502, -132},
	{0x87625F056C7C4A8B, -475, -124}, {0xC9BCFF6034C13053, -449, -116},
	{0x964E858C91BA2655, -422, -108}, {0xDFF9772470297EBD, -396, -100},
	{0xA6DFBD9FB8E5B88F, -369, -92}, {0xF8A95FCF88747D94, -343, -84},
	{0xB94470938FA89BCF, -316, -76}, {0x8A08F0F8BF0F156B, -289, -68},
	{0xCDB02555653131B6, -263, -60}, {0x993FE2C6D07B7FAC, -236, -52},
	{0xE45C10C42A2B3B06, -210, -44}, {0xAA242499697392D3, -183, -36},
	{0xFD87B5F28300CA0E, -157, -28}, {0xBCE5086492111AEB, -130, -20},
	{0x8CBCCC096F5088CC, -103, -12}, {0xD1B71758E219652C, -77, -4},
	{0x9C40000000000000, -50, 4}, {0xE8D4A51000000000, -24, 12},
	{0xAD78EBC5AC620000, 3, 20}, {0x813F3978F8940984, 30, 28},
	{0xC097CE7BC90715B3, 56, 36}, {0x8F7E32CE7BEA5C70, 83, 44},
	{0xD5D238A4ABE98068, 109, 52}, {0x9F4F2726179A2245, 136, 60},
	{0xED63A231D4C4FB27, 162, 68}, {0xB0DE65388CC8ADA8, 189, 76},
	{0x83C7088E1AAB65DB, 216, 84}, {0xC45D1DF942711D9A, 242, 92},
	{0x924D692CA61BE758, 269, 100}, {0xDA01EE641A708DEA, 295, 108},
	{0xA26DA3999AEF774A, 322, 116}, {0xF209787BB47D6B85, 348, 124},
	{0xB454E4A179DD1877, 375, 132}, {0x865B86925B9BC5C2, 402, 140},
	{0xC83553C5C8965D3D, 428, 148}, {0x952AB45CFA97A0B3, 455, 156},
	{0xDE469FBD99A05FE3, 481, 164}, {0xA59BC234DB398C25, 508, 172},
	{0xF6C69A72A3989F5C, 534, 180}, {0xB7DCBF5354E9BECE, 561, 188},
	{0x88FCF317F22241E2, 588, 196}, {0xCC20CE9BD35C78A5, 614, 204},
	{0x98165AF37B2153DF, 641, 212}, {0xE2A0B5DC971F303A, 667, 220},
	{0xA8D9D1535CE3B396, 694, 228}, {0xFB9B7CD9A4A7443C, 720, 236},
	{0xBB764C4CA7A44410, 747, 244}, {0x8BAB8EEFB6409C1A, 774, 252},
	{0xD01FEF10A657842C, 800, 260}, {0x9B10A4E5E9913129, 827, 268},
	{0xE7109BFBA19C0C9D, 853, 276}, {0xAC2820D9623BF429, 880, 284},
	{0x80444B5E7AA7CF85, 907, 292}, {0xBF21E44003ACDD2D, 933, 300},
	{0x8E679C2F5E44FF8F, 960, 308}, {0xD433179D9C8CB841, 986, 316},
	{0x9E19DB92B4E31BA9, 1013, 324},
}

func cachedPowerFor(e int) cachedPower {
	const minDecExp, step = -300, 8
	f := kAlpha - e - 1
	k := f * 78913 / (1 << 18)
	if f > 0 {
		k++
	}
	return cachedPowers[(-minDecExp+k+(step-1))/step]
}

func largestPow10(n uint32) (int, uint32) {
	p := uint32(1000000000)
	for k := 10; k > 1; k-- {
		if n >= p {
			return k, p
		}
		p /= 10
	}
	return 1, 1
}

func grisu2Round(buf []byte, dist, delta, rest, tenK uint64) {
	for rest < dist && delta-rest >= tenK && (rest+tenK < dist || dist-rest > rest+tenK-dist) {
		buf[len(buf)-1]--
		rest += tenK
	}
}

func grisu2DigitGen(mMinus, w, mPlus diyfp) ([]byte, int) {
	delta := mPlus.sub(mMinus).f
	dist := mPlus.sub(w).f
	one := diyfp{uint64(1) << -mPlus.e, mPlus.e}
	p1 := uint32(mPlus.f >> -one.e)
	p2 := mPlus.f & (one.f - 1)
	buf := make([]byte, 0, 20)
	exp := 0
	k, pow10 := largestPow10(p1)
	for n := k; n > 0; {
		d, r := p1/pow10, p1%pow10
		buf = append(buf, byte('0'+d))
		p1 = r
		n--
		rest := uint64(p1)<<-one.e + p2
		if rest <= delta {
			exp += n
			grisu2Round(buf, dist, delta, rest, uint64(pow10)<<-one.e)
			return buf, exp
		}
		pow10 /= 10
	}
	m := 0
	for {
		p2 *= 10
		d, r := p2>>-one.e, p2&(one.f-1)
		buf = append(buf, byte('0'+d))
		p2 = r
		m++
		delta *= 10
		dist *= 10
		if p2 <= delta {
			break
		}
	}
	exp -= m
	grisu2Round(buf, dist, delta, p2, one.f)
	return buf, exp
}

// grisu2 gives the digits and the decimal exponent of a finite v > 0.
func grisu2(v float64) ([]byte, int) {
	w, mMinus, mPlus := boundaries(v)
	c := cachedPowerFor(mPlus.e)
	ck := diyfp{c.f, c.e}
	ww := w.mul(ck)
	wMinus := mMinus.mul(ck)
	wPlus := mPlus.mul(ck)
	digits, exp := grisu2DigitGen(diyfp{wMinus.f + 1, wMinus.e}, ww, diyfp{wPlus.f - 1, wPlus.e})
	return digits, exp - c.k
}
