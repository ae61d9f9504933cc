// strftime_now calls std::strftime(buf, 100, format, localtime(now)): this
// is glibc's strftime (time/strftime_l.c) in the C locale, which is the
// locale the pin's programs run in, with its flags (_ - 0 ^ #), widths, E
// and O modifiers and its 100-byte buffer.

package jinja

import (
	"strconv"
	"strings"
	"time"
)

var (
	abDay   = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	fullDay = [7]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	abMon   = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
	fullMon = [12]string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
)

// ctm is the struct tm localtime fills.
type ctm struct {
	sec, min, hour, mday, mon, year, wday, yday int // year is tm_year+1900
	isdst                                       bool
	gmtoff                                      int
	zone                                        string
	unix                                        int64
}

func toTM(t time.Time) ctm {
	zone, off := t.Zone()
	return ctm{
		sec: t.Second(), min: t.Minute(), hour: t.Hour(), mday: t.Day(), mon: int(t.Month()) - 1,
		year: t.Year(), wday: int(t.Weekday()), yday: t.YearDay() - 1,
		isdst: t.IsDST(), gmtoff: off, zone: zone, unix: t.Unix(),
	}
}

// Strftime formats t in its zone as glibc's strftime does in the C locale
// (what the pin's chat code uses through std::put_time for the datetime
// and date_string it gives templates), with no bound on the length.
func Strftime(format string, t time.Time) string {
	if i := strings.IndexByte(format, 0); i >= 0 {
		format = format[:i]
	}
	tm := toTM(t)
	out, _ := strftimeInternal(format, &tm, 1<<30)
	return out
}

// strftime formats t as glibc's strftime with a 100-byte buffer would:
// false where it returns 0 (the output is empty or does not fit).
func strftime(format string, t time.Time) (string, bool) {
	if i := strings.IndexByte(format, 0); i >= 0 {
		format = format[:i] // a C string
	}
	const maxsize = 100
	tm := toTM(t)
	out, ok := strftimeInternal(format, &tm, maxsize)
	if !ok || out == "" {
		return "", false
	}
	return out, true
}

type ftimeWriter struct {
	b       []byte
	maxsize int
	failed  bool
}

// add is glibc's add(): s after width-padding (zeros with the 0 flag,
// else spaces), failing when it would fill the buffer.
func (w *ftimeWriter) add(s string, width int, pad byte) {
	if w.failed {
		return
	}
	delta := width - len(s)
	incr := len(s)
	if delta > 0 {
		incr += delta
	}
	if incr >= w.maxsize-len(w.b) {
		w.failed = true
		return
	}
	if delta > 0 {
		c := byte(' ')
		if pad == '0' {
			c = '0'
		}
		for range delta {
			w.b = append(w.b, c)
		}
	}
	w.b = append(w.b, s...)
}

// caseMap is memcpy_lowcase / memcpy_uppcase: bytewise, ASCII only (the C
// locale's tolower and toupper).
func caseMap(s string, lower, upper bool) string {
	switch {
	case lower:
		return mapBytes(s, func(_ int, c byte) byte { return toLower(c) })
	case upper:
		return mapBytes(s, func(_ int, c byte) byte { return toUpper(c) })
	}
	return s
}

func isoWeekDays(yday, wday int) int {
	const big = (366/7 + 2) * 7
	return yday - (yday-wday+4+big)%7 + 4 - 1
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

// spec is one conversion of a format: its flags, width and modifier, and
// where it is (f at its conversion character).
type spec struct {
	format                   string
	f                        int
	pad                      byte
	lower, upper, changeCase bool
	width                    int
	modifier                 byte
}

func (sp *spec) at(i int) byte {
	if i < len(sp.format) {
		return sp.format[i]
	}
	return 0
}

// parseSpec reads the flags, width and modifier after the '%' at f.
func parseSpec(format string, f int) spec {
	sp := spec{format: format, f: f, width: -1}
	for {
		sp.f++
		switch c := sp.at(sp.f); c {
		case '_', '-', '0':
			sp.pad = c
			continue
		case '^':
			sp.upper = true
			continue
		case '#':
			sp.changeCase = true
			continue
		}
		break
	}
	if isDigit(sp.at(sp.f)) {
		sp.width = 0
		for isDigit(sp.at(sp.f)) {
			d := int(sp.at(sp.f) - '0')
			if sp.width > (1<<31-1)/10 || (sp.width == (1<<31-1)/10 && d > (1<<31-1)%10) {
				sp.width = 1<<31 - 1
			} else {
				sp.width = sp.width*10 + d
			}
			sp.f++
		}
	}
	if c := sp.at(sp.f); c == 'E' || c == 'O' {
		sp.modifier = c
		sp.f++
	}
	return sp
}

func strftimeInternal(format string, tm *ctm, maxsize int) (string, bool) {
	w := &ftimeWriter{maxsize: maxsize}
	for f := 0; f < len(format); f++ {
		if w.failed {
			return "", false
		}
		if format[f] != '%' {
			w.add(format[f:f+1], -1, 0)
			continue
		}
		sp := parseSpec(format, f)
		w.convert(&sp, tm)
		f = sp.f
	}
	if w.failed {
		return "", false
	}
	return string(w.b), true
}

// cpy is glibc's cpy(): s in the spec's case, padded to its width.
func (w *ftimeWriter) cpy(sp *spec, s string) {
	w.add(caseMap(s, sp.lower, sp.upper), sp.width, sp.pad)
}

// bad is bad_format: the conversion as written, from the last '%' at or
// before f (a modifier may have stepped onto a later one).
func (w *ftimeWriter) bad(sp *spec) {
	w.cpy(sp, sp.format[strings.LastIndexByte(sp.format[:sp.f+1], '%'):sp.f+1])
}

// num is DO_NUMBER (DO_NUMBER_SPACEPAD with spacepad).
func (w *ftimeWriter) num(sp *spec, d, v int, spacepad bool) {
	if spacepad && sp.pad != '0' && sp.pad != '-' {
		sp.pad = '_'
	}
	w.number(v, max(d, sp.width), sp.width, sp.pad, sp.lower, sp.upper)
}

// subformat is a conversion made of others (%c, %D, %F...).
func (w *ftimeWriter) subformat(sp *spec, tm *ctm, sub string) {
	s, ok := strftimeInternal(sub, tm, w.maxsize)
	if !ok {
		w.failed = true
		return
	}
	if sp.upper {
		s = caseMap(s, false, true)
	}
	w.add(s, sp.width, sp.pad)
}

// convert writes one conversion: text, composite or numeric.
func (w *ftimeWriter) convert(sp *spec, tm *ctm) {
	c := sp.at(sp.f)
	switch c {
	case 'a', 'A', 'b', 'h', 'B', 'p', 'P', 'Z':
		w.text(sp, tm, c)
	case '%', 'c', 'x', 'D', 'F', 'R', 'r', 'T', 'X', 'n', 't':
		w.composite(sp, tm, c)
	case 0:
		// a '%' ending the format: written as it is
		sp.f--
		w.bad(sp)
	default:
		w.numeric(sp, tm, c)
	}
}

func (w *ftimeWriter) text(sp *spec, tm *ctm, c byte) {
	switch c {
	case 'a', 'A':
		if sp.modifier != 0 {
			w.bad(sp)
			return
		}
		if sp.changeCase {
			sp.upper, sp.lower = true, false
		}
		if c == 'a' {
			w.cpy(sp, abDay[tm.wday])
		} else {
			w.cpy(sp, fullDay[tm.wday])
		}
	case 'b', 'h', 'B':
		if sp.changeCase {
			sp.upper, sp.lower = true, false
		}
		if sp.modifier == 'E' {
			w.bad(sp)
			return
		}
		if c == 'B' {
			w.cpy(sp, fullMon[tm.mon])
		} else {
			w.cpy(sp, abMon[tm.mon])
		}
	case 'p', 'P':
		if c == 'P' {
			sp.lower = true
		}
		if sp.changeCase {
			sp.upper, sp.lower = false, true
		}
		if tm.hour > 11 {
			w.cpy(sp, "PM")
		} else {
			w.cpy(sp, "AM")
		}
	case 'Z':
		if sp.changeCase {
			sp.upper, sp.lower = false, true
		}
		w.cpy(sp, tm.zone)
	}
}

func (w *ftimeWriter) composite(sp *spec, tm *ctm, c byte) {
	switch c {
	case '%':
		if sp.modifier != 0 {
			w.bad(sp)
			return
		}
		w.add("%", sp.width, sp.pad)
	case 'n':
		w.add("\n", sp.width, sp.pad)
	case 't':
		w.add("\t", sp.width, sp.pad)
	case 'c', 'x', 'X':
		if sp.modifier == 'O' {
			w.bad(sp)
			return
		}
		w.subformat(sp, tm, map[byte]string{'c': "%a %b %e %H:%M:%S %Y", 'x': "%m/%d/%y", 'X': "%H:%M:%S"}[c])
	case 'D', 'F':
		if sp.modifier != 0 {
			w.bad(sp)
			return
		}
		w.subformat(sp, tm, map[byte]string{'D': "%m/%d/%y", 'F': "%Y-%m-%d"}[c])
	case 'R':
		w.subformat(sp, tm, "%H:%M")
	case 'r':
		w.subformat(sp, tm, "%I:%M:%S %p")
	case 'T':
		w.subformat(sp, tm, "%H:%M:%S")
	}
}

func (w *ftimeWriter) numeric(sp *spec, tm *ctm, c byte) {
	// the conversions that refuse the E modifier
	if sp.modifier == 'E' && strings.IndexByte("deHkIljMmSUVgGWw", c) >= 0 {
		w.bad(sp)
		return
	}
	hour12 := tm.hour
	if hour12 > 12 {
		hour12 -= 12
	} else if hour12 == 0 {
		hour12 = 12
	}
	switch c {
	case 'C':
		cent := tm.year / 100
		if tm.year%100 < 0 {
			cent--
		}
		w.num(sp, 1, cent, false)
	case 'd', 'e':
		w.num(sp, 2, tm.mday, c == 'e')
	case 'H', 'k':
		w.num(sp, 2, tm.hour, c == 'k')
	case 'I', 'l':
		w.num(sp, 2, hour12, c == 'l')
	case 'j':
		w.num(sp, 3, tm.yday+1, false)
	case 'M':
		w.num(sp, 2, tm.min, false)
	case 'm':
		w.num(sp, 2, tm.mon+1, false)
	case 'S':
		w.num(sp, 2, tm.sec, false)
	case 's':
		w.signed(strconv.FormatInt(tm.unix, 10), 1, sp.width, sp.pad, sp.lower, sp.upper)
	case 'u':
		w.num(sp, 1, (tm.wday-1+7)%7+1, false)
	case 'U':
		w.num(sp, 2, (tm.yday-tm.wday+7)/7, false)
	case 'V', 'g', 'G':
		w.isoWeek(sp, tm, c)
	case 'W':
		w.num(sp, 2, (tm.yday-(tm.wday-1+7)%7+7)/7, false)
	case 'w':
		w.num(sp, 1, tm.wday, false)
	case 'Y':
		if sp.modifier == 'O' {
			w.bad(sp)
			return
		}
		w.num(sp, 1, tm.year, false)
	case 'y':
		w.num(sp, 2, ((tm.year-1900)%100+100)%100, false)
	case 'z':
		diff := tm.gmtoff
		if diff < 0 {
			w.add("-", sp.width, sp.pad)
			diff = -diff
		} else {
			w.add("+", sp.width, sp.pad)
		}
		diff /= 60
		w.num(sp, 4, (diff/60)*100+diff%60, false)
	default:
		w.bad(sp)
	}
}

// isoWeek is %V, %g and %G: the ISO 8601 week and its year.
func (w *ftimeWriter) isoWeek(sp *spec, tm *ctm, c byte) {
	yearLen := func(y int) int {
		if isLeap(y) {
			return 366
		}
		return 365
	}
	year := tm.year
	days := isoWeekDays(tm.yday, tm.wday)
	if days < 0 {
		year--
		days = isoWeekDays(tm.yday+yearLen(year), tm.wday)
	} else if d := isoWeekDays(tm.yday-yearLen(year), tm.wday); d >= 0 {
		year++
		days = d
	}
	switch c {
	case 'g':
		w.num(sp, 2, (year%100+100)%100, false)
	case 'G':
		w.num(sp, 1, year, false)
	default:
		w.num(sp, 2, days/7+1, false)
	}
}

// number is do_number: v in at least digits digits, zero-padded unless
// the _ (spaces) or - (none) flag says otherwise, then the width.
func (w *ftimeWriter) number(v, digits, width int, pad byte, lower, upper bool) {
	u := uint32(v)
	if v < 0 {
		u = -u
	}
	s := strconv.FormatUint(uint64(u), 10)
	if v < 0 {
		s = "-" + s
	}
	w.signed(s, digits, width, pad, lower, upper)
}

// signed is do_number_sign_and_padding on the digits (a '-' first for a
// negative number).
func (w *ftimeWriter) signed(s string, digits, width int, pad byte, lower, upper bool) {
	if w.failed {
		return
	}
	if pad != '-' {
		padding := digits - len(s)
		if padding > 0 {
			if pad == '_' {
				if padding >= w.maxsize-len(w.b) {
					w.failed = true
					return
				}
				for range padding {
					w.b = append(w.b, ' ')
				}
				if width > padding {
					width -= padding
				} else {
					width = 0
				}
			} else {
				if digits >= w.maxsize-len(w.b) {
					w.failed = true
					return
				}
				if s[0] == '-' {
					s = s[1:]
					w.b = append(w.b, '-')
				}
				for range padding {
					w.b = append(w.b, '0')
				}
				width = 0
			}
		}
	}
	w.add(caseMap(s, lower, upper), width, pad)
}
