package main

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Numbers as llama.cpp's options read them (common/arg.cpp): std::stoi,
// std::stoul and std::stof over the C library's strtol, strtoul and strtof
// (glibc's, in the "C" locale), which read the longest prefix that is a
// number, after white space, and ignore what follows ("12abc" is 12,
// "-0.5" is 0 to stoi); no number at all is std::invalid_argument, a
// number out of the type's range std::out_of_range (ERANGE), and both end
// the option with an error.

var (
	errNoNumber  = errors.New("not a number")
	errOutOfType = errors.New("out of range")
)

// isCSpace is isspace in the "C" locale.
func isCSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipSign skips white space and a sign; it returns where the digits
// start and whether the sign was '-'.
func skipSign(s string) (int, bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	return i, neg
}

// decimalDigits reads the decimal digits of s from i into a uint64: their
// value, where they end, and whether it passed 2^64-1 (ERANGE).
func decimalDigits(s string, i int) (v uint64, end int, over bool) {
	for end = i; end < len(s) && isDigit(s[end]); end++ {
		d := uint64(s[end] - '0')
		if v > (math.MaxUint64-d)/10 {
			over = true
		} else if !over {
			v = v*10 + d
		}
	}
	return v, end, over
}

// stoi is std::stoi: strtol's long (64 bits), then the range of int.
func stoi(s string) (int32, error) {
	i, neg := skipSign(s)
	v, end, over := decimalDigits(s, i)
	if end == i {
		return 0, fmt.Errorf("%w: want an integer", errNoNumber)
	}
	if over || !neg && v > math.MaxInt32 || neg && v > -math.MinInt32 {
		return 0, fmt.Errorf("%w: want an integer from %d to %d", errOutOfType, math.MinInt32, math.MaxInt32)
	}
	if neg {
		return int32(-int64(v)), nil
	}
	return int32(v), nil
}

// stoul32 is std::stoul stored into a uint32_t, as --seed stores it:
// strtoul's unsigned long (64 bits; a '-' negates it modulo 2^64, so -1
// is 2^64-1), its low 32 bits.
func stoul32(s string) (uint32, error) {
	i, neg := skipSign(s)
	v, end, over := decimalDigits(s, i)
	if end == i {
		return 0, fmt.Errorf("%w: want an integer", errNoNumber)
	}
	if over {
		return 0, fmt.Errorf("%w: want an integer of at most 20 digits, up to %d", errOutOfType, uint64(math.MaxUint64))
	}
	if neg {
		v = -v
	}
	return uint32(v), nil
}

// stof is std::stof.
func stof(s string) (float32, error) {
	f, n, erange := strtof(s)
	switch {
	case n == 0:
		return 0, fmt.Errorf("%w: want a number", errNoNumber)
	case erange:
		return 0, fmt.Errorf("%w: %s is past what a float holds (%g to %g, and 0)", errOutOfType, strings.TrimSpace(s[:n]), math.SmallestNonzeroFloat32, math.MaxFloat32)
	}
	return f, nil
}

// strtof is glibc's strtof: the float, the bytes read (0: none) and
// whether it set ERANGE: on overflow, and on underflow, where the value,
// rounded to a float's precision with no bound on the exponent, is below
// the least normal float and the result is not exact (as the x86 rounds:
// tininess after rounding).
func strtof(s string) (f float32, n int, erange bool) {
	i, neg := skipSign(s)
	sign := func(f float32) float32 {
		if neg {
			return -f
		}
		return f
	}
	rest := strings.ToLower(s[i:])
	switch {
	case strings.HasPrefix(rest, "infinity"):
		return sign(float32(math.Inf(1))), i + 8, false
	case strings.HasPrefix(rest, "inf"):
		return sign(float32(math.Inf(1))), i + 3, false
	case strings.HasPrefix(rest, "nan"):
		return nanPayload(s, i+3, neg)
	}
	var x *big.Rat
	var end int
	if strings.HasPrefix(rest, "0x") {
		x, end = hexFloat(s, i+2)
	}
	if x == nil {
		x, end = decimalFloat(s, i)
	}
	if x == nil {
		return 0, 0, false
	}
	if x.Sign() == 0 {
		return sign(0), end, false
	}
	f, _ = x.Float32()
	if math.IsInf(float64(f), 0) {
		return sign(f), end, true
	}
	// (big.Rat's own exactness says yes for some values that round to 0)
	exact := new(big.Rat).SetFloat64(float64(f)).Cmp(x) == 0
	r := new(big.Float).SetPrec(24).SetRat(x)
	tiny := r.Cmp(new(big.Float).SetMantExp(big.NewFloat(1), -126)) < 0
	return sign(f), end, tiny && !exact
}

// Bounds past which a float's value is 0 or infinite whatever its other
// digits, so that no exponent makes a huge number.
const (
	maxSigDigits = 1200 // decimal digits kept (a float's halfway points need 112)
	maxSigHex    = 300  // hex digits kept
)

// mantissa reads digits with an optional point at s[i:] (isDig tells a
// digit): the significant digits (leading zeros dropped, capped at keep
// with a last "1" standing for the nonzero ones dropped), how many of
// them come after the point, and where they end; ok is false with no
// digit at all.
func mantissa(s string, i int, isDig func(byte) bool, keep int) (digits string, frac int, end int, ok bool) {
	var b strings.Builder
	sticky := false
	seen := false
	point := false
	for end = i; end < len(s); end++ {
		c := s[end]
		if c == '.' && !point {
			point = true
			continue
		}
		if !isDig(c) {
			break
		}
		seen = true
		if b.Len() == 0 && c == '0' {
			if point {
				frac++
			}
			continue
		}
		if b.Len() < keep {
			b.WriteByte(c)
			if point {
				frac++
			}
		} else {
			if c != '0' {
				sticky = true
			}
			if !point {
				frac-- // a dropped digit before the point scales what is kept
			}
		}
	}
	if !seen {
		return "", 0, i, false
	}
	if sticky {
		b.WriteByte('1')
		frac++
	}
	return b.String(), frac, end, true
}

// exponent reads an exponent after the mantissa at s[i]: a letter of
// marks, a sign and digits, capped at ±1e6; without digits, none is read.
func exponent(s string, i int, marks string) (e int64, end int) {
	if i >= len(s) || !strings.ContainsRune(marks, rune(s[i])) {
		return 0, i
	}
	j, neg := skipSignOnly(s, i+1)
	k := j
	for ; k < len(s) && isDigit(s[k]); k++ {
		if e < 1e6 {
			e = e*10 + int64(s[k]-'0')
		}
	}
	if k == j {
		return 0, i
	}
	if neg {
		e = -e
	}
	return e, k
}

func skipSignOnly(s string, i int) (int, bool) {
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		return i + 1, s[i] == '-'
	}
	return i, false
}

// decimalFloat reads a decimal float at s[i:]: its exact value (0 or a
// huge value past a float's range stand for all such), or nil.
func decimalFloat(s string, i int) (*big.Rat, int) {
	digits, frac, end, ok := mantissa(s, i, isDigit, maxSigDigits)
	if !ok {
		return nil, 0
	}
	e, end := exponent(s, end, "eE")
	if digits == "" {
		return new(big.Rat), end
	}
	e -= int64(frac)
	// the value is about 10^(len(digits)+e-1)
	switch mag := int64(len(digits)) + e - 1; {
	case mag > 40:
		return big.NewRat(1, 1).SetFloat64(math.MaxFloat64), end
	case mag < -50:
		return big.NewRat(1, 1).SetFloat64(math.SmallestNonzeroFloat64), end
	}
	num, _ := new(big.Int).SetString(digits, 10)
	x := new(big.Rat).SetInt(num)
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs64(e)), nil)
	if e >= 0 {
		return x.Mul(x, new(big.Rat).SetInt(p)), end
	}
	return x.Quo(x, new(big.Rat).SetInt(p)), end
}

// hexFloat reads a hex float's digits at s[i:] (after "0x"): its exact
// value, or nil where no hex digit follows (strtof then reads the "0").
func hexFloat(s string, i int) (*big.Rat, int) {
	isHex := func(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }
	digits, frac, end, ok := mantissa(s, i, isHex, maxSigHex)
	if !ok {
		return nil, 0
	}
	e, end := exponent(s, end, "pP")
	if digits == "" {
		return new(big.Rat), end
	}
	e -= 4 * int64(frac)
	switch mag := 4*int64(len(digits)) + e; {
	case mag > 140:
		return big.NewRat(1, 1).SetFloat64(math.MaxFloat64), end
	case mag < -170:
		return big.NewRat(1, 1).SetFloat64(math.SmallestNonzeroFloat64), end
	}
	num, _ := new(big.Int).SetString(digits, 16)
	x := new(big.Rat).SetInt(num)
	p := new(big.Int).Lsh(big.NewInt(1), uint(abs64(e)))
	if e >= 0 {
		return x.Mul(x, new(big.Rat).SetInt(p)), end
	}
	return x.Quo(x, new(big.Rat).SetInt(p)), end
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// logitBias reads -l's TOKEN_ID(+/-)BIAS as common/arg.cpp reads it
// through a std::stringstream: an int (white space, a sign, digits;
// failing past int's range), the next character that is not white space
// (the sign), the rest of the line, read by std::stof ("15043+1,15044-1"
// is a bias of 1 for 15043: stof stops at the comma).
func logitBias(v string) (int32, float32, error) {
	bad := fmt.Errorf("invalid input format")
	i, neg := skipSign(v)
	n, end, over := decimalDigits(v, i)
	if end == i || over || !neg && n > math.MaxInt32 || neg && n > -math.MinInt32 {
		return 0, 0, bad
	}
	id := int32(n)
	if neg {
		id = int32(-int64(n))
	}
	for end < len(v) && isCSpace(v[end]) {
		end++
	}
	if end >= len(v) {
		return 0, 0, bad
	}
	sign := v[end]
	rest := v[end+1:]
	if rest == "" {
		return 0, 0, bad // (std::getline extracts nothing)
	}
	if j := strings.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	if sign != '+' && sign != '-' {
		return 0, 0, bad
	}
	b, err := stof(rest)
	if err != nil {
		return 0, 0, bad
	}
	if sign == '-' && !math.IsNaN(float64(b)) {
		b = -b // (the x86 multiplies by -1: a NaN keeps its sign)
	}
	return id, b, nil
}

// nanPayload reads what follows "nan" at s[i:]: an n-char-sequence in
// parentheses, which glibc reads with strtoull(seq, 0) and, where that
// reads all of it, takes the low 22 bits of as the quiet NaN's payload
// (and strtoull's ERANGE, past 2^64-1, stays in errno: std::stof then
// refuses the value).
func nanPayload(s string, i int, neg bool) (float32, int, bool) {
	bits := uint32(0x7fc00000)
	if neg {
		bits |= 1 << 31
	}
	end, erange := i, false
	j := i
	if j < len(s) && s[j] == '(' {
		for j++; j < len(s) && (isDigit(s[j]) || s[j] == '_' || s[j]|0x20 >= 'a' && s[j]|0x20 <= 'z'); j++ {
		}
		if j < len(s) && s[j] == ')' {
			end = j + 1
			var mant uint64
			var n int
			mant, n, erange = strtoull0(s[i+1 : j])
			if n == j-(i+1) && mant&0x3fffff != 0 {
				bits |= uint32(mant & 0x3fffff)
			}
		}
	}
	return math.Float32frombits(bits), end, erange
}

// strtoull0 is strtoull(s, &end, 0) of an n-char-sequence (no space, no
// sign): "0x" hex, "0" octal, else decimal; the value, the bytes read and
// whether it passed 2^64-1 (ERANGE, the value then 2^64-1).
func strtoull0(s string) (v uint64, n int, erange bool) {
	base, i := uint64(10), 0
	switch {
	case len(s) > 2 && s[0] == '0' && s[1]|0x20 == 'x' && hexVal(s[2]) < 16:
		base, i = 16, 2
	case len(s) > 0 && s[0] == '0':
		base = 8
	}
	for ; i < len(s); i++ {
		d := hexVal(s[i])
		if d >= base {
			break
		}
		if v > (math.MaxUint64-d)/base {
			erange, v = true, math.MaxUint64
		} else if !erange {
			v = v*base + d
		}
	}
	return v, i, erange
}

// hexVal is a hex digit's value, 16 or more for another byte.
func hexVal(c byte) uint64 {
	switch {
	case isDigit(c):
		return uint64(c - '0')
	case c|0x20 >= 'a' && c|0x20 <= 'f':
		return uint64(c|0x20-'a') + 10
	}
	return 99
}
