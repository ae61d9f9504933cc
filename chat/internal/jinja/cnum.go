// The C library's number conversions that the pin's values go through:
// std::to_string(double) ("%f"), an ostream's default double output
// ("%g"), std::stoi (strtol) and std::stod (strtod), as glibc does them.

package jinja

import (
	"math"
	"strconv"
	"strings"
)

func cSpecial(f float64) (string, bool) {
	switch {
	case math.IsNaN(f):
		if math.Signbit(f) {
			return "-nan", true
		}
		return "nan", true
	case math.IsInf(f, 1):
		return "inf", true
	case math.IsInf(f, -1):
		return "-inf", true
	}
	return "", false
}

// floatString is value_float_t::as_string: "%f", trailing zeros dropped
// but one after the point.
func floatString(f float64) string {
	out, ok := cSpecial(f)
	if !ok {
		out = strconv.FormatFloat(f, 'f', 6, 64)
	}
	out = strings.TrimRight(out, "0")
	if strings.HasSuffix(out, ".") {
		out += "0"
	}
	return out
}

// fmtG is "%g" (an ostream's default for a double: six significant
// digits).
func fmtG(f float64) string {
	if s, ok := cSpecial(f); ok {
		return s
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0"
		}
		return "0"
	}
	const prec = 6
	e := strconv.FormatFloat(f, 'e', prec-1, 64)
	i := strings.LastIndexByte(e, 'e')
	x, _ := strconv.Atoi(e[i+1:])
	if x < -4 || x >= prec {
		mant := trimFraction(e[:i])
		sign := "+"
		if x < 0 {
			sign, x = "-", -x
		}
		exp := strconv.Itoa(x)
		if len(exp) < 2 {
			exp = "0" + exp
		}
		return mant + "e" + sign + exp
	}
	return trimFraction(strconv.FormatFloat(f, 'f', prec-1-x, 64))
}

func trimFraction(s string) string {
	if strings.IndexByte(s, '.') < 0 {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func skipCSpace(s string) string {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return s[i:]
}

func digitVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 99
}

// stoi is std::stoi(s, nullptr, base): strtol's prefix of s, and false
// where std::stoi throws (nothing read, or out of an int's range).
func stoi(s string, base int) (int64, bool) {
	s = skipCSpace(s)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if (base == 0 || base == 16) && len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		if len(s) > 2 && digitVal(s[2]) < 16 {
			s = s[2:]
			base = 16
		} else {
			return 0, true // "0" read, the x left
		}
	}
	if base == 0 {
		base = 10
		if s != "" && s[0] == '0' {
			base = 8
		}
	}
	var v uint64
	n := 0
	overflow := false
	for n < len(s) && digitVal(s[n]) < base {
		d := uint64(digitVal(s[n]))
		if v > (math.MaxUint64-d)/uint64(base) {
			overflow = true
		} else {
			v = v*uint64(base) + d
		}
		n++
	}
	if n == 0 {
		return 0, false
	}
	if overflow || (!neg && v > math.MaxInt32) || (neg && v > -math.MinInt32) {
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

// stodC is std::stod(s): strtod's longest prefix of s (decimal, hex,
// inf, nan), and false where std::stod throws (nothing read, or glibc
// reports ERANGE: overflow, or underflow to zero or a subnormal).
func stodC(s string) (float64, bool) {
	s = skipCSpace(s)
	neg := false
	body := s
	if body != "" && (body[0] == '+' || body[0] == '-') {
		neg = body[0] == '-'
		body = body[1:]
	}
	sign := func(f float64) float64 {
		if neg {
			return -f
		}
		return f
	}
	lower := strings.ToLower(body)
	switch {
	case strings.HasPrefix(lower, "inf"):
		return sign(math.Inf(1)), true
	case strings.HasPrefix(lower, "nan"):
		return sign(math.NaN()), true
	}
	var num string
	hex := len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')
	if hex {
		num = scanHexFloat(body)
		if num == "" {
			return 0, true // "0" read
		}
	} else {
		num = scanDecFloat(body)
		if num == "" {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return 0, false
	}
	a := math.Abs(f)
	if math.IsInf(a, 0) {
		return 0, false
	}
	if a < 0x1p-1022 && strings.Trim(strings.ToLower(num), "0x.p+-") != "" && hasNonzeroMantissa(num, hex) {
		return 0, false
	}
	return sign(f), true
}

func hasNonzeroMantissa(num string, hex bool) bool {
	if hex {
		num = num[2:]
		if i := strings.IndexAny(num, "pP"); i >= 0 {
			num = num[:i]
		}
	} else if i := strings.IndexAny(num, "eE"); i >= 0 {
		num = num[:i]
	}
	return strings.Trim(num, "0.") != ""
}

func scanDecFloat(s string) string {
	i := 0
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return ""
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			i = j
		}
	}
	return s[:i]
}

// scanHexFloat is the hex float at the start of s ("0x..."), with a "p0"
// added where it has no exponent (Go's parser wants one), or "" when no
// hex digit follows the prefix.
func scanHexFloat(s string) string {
	i := 2
	digits := 0
	for i < len(s) && digitVal(s[i]) < 16 {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && digitVal(s[i]) < 16 {
			i++
			digits++
		}
	}
	if digits == 0 {
		return ""
	}
	mant := s[:i]
	if i < len(s) && (s[i] == 'p' || s[i] == 'P') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			return s[:j]
		}
	}
	return mant + "p0"
}
