// Port of llama.cpp common/jinja/utils.h (v0.5.0): the source excerpt that
// the pin's error messages show. The pin's hasher is not ported: object
// keys are found by equivalence here, which is what the pin's hash table
// decides (its hash agrees with its equivalence for every key it admits).

package jinja

import (
	"strconv"
	"strings"
)

// peakSource is peak_source: up to 40 bytes either side of pos, newlines
// shown as ↵, and a caret under pos.
func peakSource(source string, pos int) string {
	if source == "" {
		return "(no source available)"
	}
	const peak = 40
	start := 0
	if pos >= peak {
		start = pos - peak
	}
	end := min(pos+peak, len(source))
	sub := ""
	if start < len(source) && end > start {
		sub = source[start:end]
	}
	sub = strings.ReplaceAll(sub, "\n", "↵")
	return "..." + sub + "...\n" + strings.Repeat(" ", pos-start+3) + "^"
}

// fmtErrorWithSource is fmt_error_with_source.
func fmtErrorWithSource(tag, msg, source string, pos int) string {
	return tag + ": " + msg + "\n" + peakSource(source, pos)
}

// lineCol is the 1-based line and column of byte pos (get_line_col).
func lineCol(source string, pos int) (line, col int) {
	line, col = 1, 1
	for i := 0; i < pos && i < len(source); i++ {
		if source[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

func lineColText(source string, pos int) string {
	l, c := lineCol(source, pos)
	return "line " + strconv.Itoa(l) + ", column " + strconv.Itoa(c)
}
