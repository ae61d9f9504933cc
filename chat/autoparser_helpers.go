// Port of llama.cpp common/chat-auto-parser-helpers.h and
// chat-auto-parser-helpers.cpp (v0.5.0), and of the tagged parsers of
// common/chat-peg-parser.cpp: what the differential analysis compares
// renders with.

package chat

import (
	"strconv"
	"strings"

	"github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// trimWhitespace is trim_whitespace: the C locale's spaces off both ends.
func trimWhitespace(s string) string {
	i, j := 0, len(s)
	for i < j && isSpace(s[i]) {
		i++
	}
	for j > i && isSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

func trimLeadingWhitespace(s string) string {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return s[i:]
}

func trimTrailingWhitespace(s string) string {
	j := len(s)
	for j > 0 && isSpace(s[j-1]) {
		j--
	}
	return s[:j]
}

// substr is std::string::substr with size_t arithmetic: pos past the end
// throws as libstdc++ does, a count past the end stops there.
func substr(s string, pos, n uint64) string {
	if pos > uint64(len(s)) {
		peg.Throw(&Error{Msg: "basic_string::substr: __pos (which is " + strconv.FormatUint(pos, 10) +
			") > this->size() (which is " + strconv.Itoa(len(s)) + ")"})
	}
	if rest := uint64(len(s)) - pos; n > rest {
		n = rest
	}
	return s[pos : pos+n]
}

// npos is std::string::npos.
const npos = ^uint64(0)

// find is std::string::find: the index, or npos.
func find(s, sub string) uint64 {
	if i := strings.Index(s, sub); i >= 0 {
		return uint64(i)
	}
	return npos
}

// rfind is std::string::rfind.
func rfind(s, sub string) uint64 {
	if i := strings.LastIndex(s, sub); i >= 0 {
		return uint64(i)
	}
	return npos
}

// upTo is s.substr(0, s.find(sub)): s before sub, or all of s.
func upTo(s, sub string) string {
	if i := strings.Index(s, sub); i >= 0 {
		return s[:i]
	}
	return s
}

type segmentType int

const (
	segText segmentType = iota
	segMarker
)

type segment struct {
	typ   segmentType
	value string
}

// segmentize is segmentize_markers: text cut into <...> and [...]
// markers and the text between.
func segmentize(text string) []segment {
	var out []segment
	inMarker := false
	var opener byte
	last := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if !inMarker && (c == '<' || c == '[') {
			if last < i {
				out = append(out, segment{segText, text[last:i]})
			}
			last = i
			inMarker = true
			opener = c
		} else if inMarker && (opener == '<' && c == '>' || opener == '[' && c == ']') {
			out = append(out, segment{segMarker, text[last : i+1]})
			last = i + 1
			inMarker = false
		}
	}
	if last < len(text) {
		out = append(out, segment{segText, text[last:]})
	}
	return out
}

// pruneWhitespace is prune_whitespace_segments.
func pruneWhitespace(segs []segment) []segment {
	var out []segment
	for _, s := range segs {
		if trimWhitespace(s.value) != "" {
			out = append(out, s)
		}
	}
	return out
}

// diffSplit is diff_split: the common prefix and suffix of two renders,
// and what differs between them.
type diffSplit struct{ prefix, suffix, left, right string }

func commonPrefixLen(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func commonSuffixLen(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// calculateDiffSplit is calculate_diff_split: the prefix and suffix end
// on marker boundaries.
func calculateDiffSplit(left, right string) diffSplit {
	var r diffSplit
	L, R := segmentize(left), segmentize(right)
	if len(L) == 0 {
		r.right = right
		return r
	}
	if len(R) == 0 {
		r.left = left
		return r
	}
	ls, le, rs, re := 0, len(L)-1, 0, len(R)-1
	leftDone, rightDone := false, false
	for ls != le && rs != re {
		advanced := false
		if L[ls] == R[rs] {
			r.prefix += L[ls].value
			ls++
			rs++
			advanced = true
		}
		if L[le] == R[re] {
			r.suffix = L[le].value + r.suffix
			if ls != le {
				le--
			} else {
				leftDone = true
			}
			if rs != re {
				re--
			} else {
				rightDone = true
			}
			advanced = true
		}
		if !advanced {
			break
		}
	}
	switch {
	case ls == le && rs != re:
		if L[ls] == R[re] {
			r.suffix = R[re].value + r.suffix
			re--
			leftDone = true
		} else if L[ls] == R[rs] {
			r.prefix += R[rs].value
			rs++
			leftDone = true
		}
	case rs == re && ls != le:
		if L[le] == R[rs] {
			r.suffix = L[le].value + r.suffix
			le--
			rightDone = true
		} else if L[ls] == R[rs] {
			r.prefix += L[ls].value
			ls++
			rightDone = true
		}
	case ls == le && rs == re && L[ls] == R[rs] && L[ls].typ == segMarker:
		r.prefix += R[rs].value
		leftDone, rightDone = true, true
	}
	textSuffix := L[le].typ == segText && R[re].typ == segText
	textPrefix := R[rs].typ == segText && L[ls].typ == segText
	join := func(segs []segment, from, to int, done bool) string {
		if !done {
			to++
		}
		var b strings.Builder
		for i := from; i < to; i++ {
			b.WriteString(segs[i].value)
		}
		return b.String()
	}
	restL, restR := join(L, ls, le, leftDone), join(R, rs, re, rightDone)
	suffixLen := 0
	if textSuffix {
		suffixLen = commonSuffixLen(restL, restR)
	}
	prefixLen := 0
	if textPrefix {
		prefixLen = commonPrefixLen(restL[:len(restL)-suffixLen], restR[:len(restR)-suffixLen])
	}
	r.prefix += restL[:prefixLen]
	r.suffix = restL[len(restL)-suffixLen:] + r.suffix
	r.left = restL[prefixLen : len(restL)-suffixLen]
	r.right = restR[prefixLen : len(restR)-suffixLen]
	if r.left == "" && r.right == "" {
		r.prefix, r.suffix = left, ""
	}
	if r.left == "" && r.right != "" && len(left) <= len(right) && strings.HasPrefix(right, left) {
		r.prefix, r.suffix, r.right = left, "", right[len(left):]
	}
	return r
}

// untilCommonPrefix is until_common_prefix: full up to where the common
// prefix of left and right first occurs in it.
func untilCommonPrefix(full, left, right string) string {
	n := commonPrefixLen(left, right)
	if n == 0 {
		return ""
	}
	if i := strings.Index(full, left[:n]); i >= 0 {
		return full[:i]
	}
	return ""
}

// afterCommonSuffix is after_common_suffix: full after where the common
// suffix of left and right last occurs in it.
func afterCommonSuffix(full, left, right string) string {
	n := commonSuffixLen(left, right)
	if n == 0 {
		return ""
	}
	if i := strings.LastIndex(full, left[len(left)-n:]); i >= 0 {
		return full[i+n:]
	}
	return ""
}

// templateParams is template_params: a probe render's inputs.
type templateParams struct {
	messages       ojson.Value
	tools          ojson.Value
	addGenPrompt   bool
	enableThinking bool
	extraContext   *ojson.Value
}

const errTmpl = "#**ERROR**#"

// applyTemplate is autoparser::apply_template: a render, or errTmpl.
func applyTemplate(t *template, p *templateParams) (out string) {
	g := newGenParams()
	g.messages = p.messages
	g.tools = p.tools
	g.addGenPrompt = p.addGenPrompt
	g.enableThinking = p.enableThinking
	if p.extraContext != nil {
		g.extraContext = p.extraContext.Clone()
	}
	g.extraContext.Set("enable_thinking", ojson.BoolValue(p.enableThinking))
	var err error
	func() {
		defer peg.Catch(&err)
		out = directApply(t, &g, nil, nil, nil)
	}()
	if err != nil {
		return errTmpl
	}
	return out
}

// compareResult is compare_variants_result.
type compareResult struct {
	diff diffSplit
	a, b string
}

// compareVariants renders the params and their variant by modify, and
// splits the two: false where either render fails.
func compareVariants(t *template, pa templateParams, modify func(p *templateParams)) (compareResult, bool) {
	pb := pa
	if modify != nil {
		modify(&pb)
	}
	a, b := applyTemplate(t, &pa), applyTemplate(t, &pb)
	if a == errTmpl || b == errTmpl {
		return compareResult{}, false
	}
	return compareResult{diff: calculateDiffSplit(a, b), a: a, b: b}, true
}

// tagged is tagged_peg_parser: a parser whose tags are read back.
type tagged struct{ a *peg.Arena }

func buildTagged(fn func(b *peg.Builder) peg.Expr) tagged { return tagged{build(fn)} }

type taggedResult struct {
	res  peg.Result
	tags map[string]string
}

func (r taggedResult) ok() bool { return r.res.Type == peg.Success }

func (t tagged) parseAt(input string, start int) taggedResult {
	ctx := &peg.Context{Input: input}
	res, err := t.a.Parse(ctx, start)
	if err != nil {
		peg.Throw(err)
	}
	tags := map[string]string{}
	ctx.AST.VisitResult(res, func(n *peg.Node) {
		if n.Tag != "" {
			tags[n.Tag] = n.Text
		}
	})
	return taggedResult{res, tags}
}

// extract is parse_and_extract.
func (t tagged) extract(input string) taggedResult { return t.parseAt(input, 0) }

// extractAnywhere is parse_anywhere_and_extract: the first position the
// parser succeeds at, or the last one tried.
func (t tagged) extractAnywhere(input string) taggedResult {
	if input == "" {
		return t.extract(input)
	}
	for i := 0; i < len(input); i++ {
		r := t.parseAt(input, i)
		if r.ok() || i == len(input)-1 {
			return r
		}
	}
	return taggedResult{}
}
