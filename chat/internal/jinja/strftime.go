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

func strftimeInternal(format string, tm *ctm, maxsize int) (string, bool) {
	w := &ftimeWriter{maxsize: maxsize}
	hour12 := tm.hour
	if hour12 > 12 {
		hour12 -= 12
	} else if hour12 == 0 {
		hour12 = 12
	}
	at := func(i int) byte {
		if i < len(format) {
			return format[i]
		}
		return 0
	}
	for f := 0; f < len(format); f++ {
		if w.failed {
			return "", false
		}
		if format[f] != '%' {
			w.add(format[f:f+1], -1, 0)
			continue
		}
		var pad byte
		lower, upper, changeCase := false, false, false
	flags:
		for {
			f++
			switch at(f) {
			case '_', '-', '0':
				pad = at(f)
			case '^':
				upper = true
			case '#':
				changeCase = true
			default:
				break flags
			}
		}
		width := -1
		if isDigit(at(f)) {
			width = 0
			for isDigit(at(f)) {
				d := int(at(f) - '0')
				if width > (1<<31-1)/10 || (width == (1<<31-1)/10 && d > (1<<31-1)%10) {
					width = 1<<31 - 1
				} else {
					width = width*10 + d
				}
				f++
			}
		}
		var modifier byte
		if c := at(f); c == 'E' || c == 'O' {
			modifier = c
			f++
		}
		cpy := func(s string) { w.add(caseMap(s, lower, upper), width, pad) }
		// bad_format: the conversion as written, from the last '%' at or
		// before f (a modifier may have stepped onto a later one)
		bad := func() {
			cpy(format[strings.LastIndexByte(format[:f+1], '%') : f+1])
		}
		number := func(d, v int, spacepad bool) {
			digits := max(d, width)
			if spacepad && pad != '0' && pad != '-' {
				pad = '_'
			}
			w.number(v, digits, width, pad, lower, upper)
		}
		subformat := func(sub string) {
			s, ok := strftimeInternal(sub, tm, maxsize)
			if !ok {
				w.failed = true
				return
			}
			if upper {
				s = caseMap(s, false, true)
			}
			w.add(s, width, pad)
		}
		switch c := at(f); c {
		case '%':
			if modifier != 0 {
				bad()
				break
			}
			w.add("%", width, pad)
		case 'a', 'A':
			if modifier != 0 {
				bad()
				break
			}
			if changeCase {
				upper, lower = true, false
			}
			if c == 'a' {
				cpy(abDay[tm.wday])
			} else {
				cpy(fullDay[tm.wday])
			}
		case 'b', 'h', 'B':
			if changeCase {
				upper, lower = true, false
			}
			if modifier == 'E' {
				bad()
				break
			}
			if c == 'B' {
				cpy(fullMon[tm.mon])
			} else {
				cpy(abMon[tm.mon])
			}
		case 'c':
			if modifier == 'O' {
				bad()
				break
			}
			subformat("%a %b %e %H:%M:%S %Y")
		case 'C':
			y := tm.year
			c := y / 100
			if y%100 < 0 {
				c--
			}
			number(1, c, false)
		case 'x':
			if modifier == 'O' {
				bad()
				break
			}
			subformat("%m/%d/%y")
		case 'D':
			if modifier != 0 {
				bad()
				break
			}
			subformat("%m/%d/%y")
		case 'd', 'e':
			if modifier == 'E' {
				bad()
				break
			}
			number(2, tm.mday, c == 'e')
		case 'F':
			if modifier != 0 {
				bad()
				break
			}
			subformat("%Y-%m-%d")
		case 'H', 'k':
			if modifier == 'E' {
				bad()
				break
			}
			number(2, tm.hour, c == 'k')
		case 'I', 'l':
			if modifier == 'E' {
				bad()
				break
			}
			number(2, hour12, c == 'l')
		case 'j':
			if modifier == 'E' {
				bad()
				break
			}
			number(3, tm.yday+1, false)
		case 'M':
			if modifier == 'E' {
				bad()
				break
			}
			number(2, tm.min, false)
		case 'm':
			if modifier == 'E' {
				bad()
				break
			}
			number(2, tm.mon+1, false)
		case 'n':
			w.add("\n", width, pad)
		case 't':
			w.add("\t", width, pad)
		case 'P', 'p':
			if c == 'P' {
				lower = true
			}
			if changeCase {
				upper, lower = false, true
			}
			if tm.hour > 11 {
				cpy("PM")
			} else {
				cpy("AM")
			}
		case 'R':
			subformat("%H:%M")
		case 'r':
			subformat("%I:%M:%S %p")
		case 'S':
			if modifier == 'E' {
				bad()
				break
			}
			number(2, tm.sec, false)
		case 's':
			w.signed(strconv.FormatInt(tm.unix, 10), 1, width, pad, lower, upper)
		case 'X':
			if modifier == 'O' {
				bad()
				break
			}
			subformat("%H:%M:%S")
		case 'T':
			subformat("%H:%M:%S")
		case 'u':
			number(1, (tm.wday-1+7)%7+1, false)
		case 'U':
			if modifier == 'E' {
				bad()
				break
			}
			number(2, (tm.yday-tm.wday+7)/7, false)
		case 'V', 'g', 'G':
			if modifier == 'E' {
				bad()
				break
			}
			year := tm.year
			days := isoWeekDays(tm.yday, tm.wday)
			if days < 0 {
				year--
				l := 365
				if isLeap(year) {
					l = 366
				}
				days = isoWeekDays(tm.yday+l, tm.wday)
			} else {
				l := 365
				if isLeap(year) {
					l = 366
				}
				if d := isoWeekDays(tm.yday-l, tm.wday); d >= 0 {
					year++
					days = d
				}
			}
			switch c {
			case 'g':
				number(2, (year%100+100)%100, false)
			case 'G':
				number(1, year, false)
			default:
				number(2, days/7+1, false)
			}
		case 'W':
			if modifier == 'E' {
				bad()
				break
			}
			number(2, (tm.yday-(tm.wday-1+7)%7+7)/7, false)
		case 'w':
			if modifier == 'E' {
				bad()
				break
			}
			number(1, tm.wday, false)
		case 'Y':
			if modifier == 'O' {
				bad()
				break
			}
			number(1, tm.year, false)
		case 'y':
			number(2, ((tm.year-1900)%100+100)%100, false)
		case 'Z':
			if changeCase {
				upper, lower = false, true
			}
			cpy(tm.zone)
		case 'z':
			diff := tm.gmtoff
			if diff < 0 {
				w.add("-", width, pad)
				diff = -diff
			} else {
				w.add("+", width, pad)
			}
			diff /= 60
			number(4, (diff/60)*100+diff%60, false)
		case 0:
			// a '%' ending the format: written as it is
			f--
			bad()
		default:
			bad()
		}
	}
	if w.failed {
		return "", false
	}
	return string(w.b), true
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
