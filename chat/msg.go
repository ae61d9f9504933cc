// Port of llama.cpp common/chat.h and common/chat.cpp (v0.5.0): the
// message, its OpenAI JSON, and the streaming diffs between two parses.

package chat

import (
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/ojson"
)

// Message is common_chat_msg: one message of a conversation, or a parsed
// reply.
type Message struct {
	Role    string
	Content string
	// ContentParts are typed parts ("text", "media_marker"), used in
	// place of Content.
	ContentParts     []ContentPart
	ToolCalls        []ToolCall
	ReasoningContent string
	// ToolName and ToolCallID are a tool result's "name" and
	// "tool_call_id".
	ToolName   string
	ToolCallID string
}

// ContentPart is common_chat_msg_content_part.
type ContentPart struct{ Type, Text string }

// ToolCall is common_chat_tool_call: a call's function name, its
// arguments as JSON text, and its id.
type ToolCall struct{ Name, Arguments, ID string }

// Tool is common_chat_tool: a function the model may call, its
// parameters a JSON schema as text.
type Tool struct{ Name, Description, Parameters string }

// Empty says whether the message holds nothing (its role aside).
func (m *Message) Empty() bool {
	return m.Content == "" && len(m.ContentParts) == 0 && len(m.ToolCalls) == 0 && m.ReasoningContent == "" &&
		m.ToolName == "" && m.ToolCallID == ""
}

// Equal is common_chat_msg's operator==.
func (m *Message) Equal(o *Message) bool {
	if m.Role != o.Role || m.Content != o.Content || m.ReasoningContent != o.ReasoningContent ||
		m.ToolName != o.ToolName || m.ToolCallID != o.ToolCallID ||
		len(m.ContentParts) != len(o.ContentParts) || len(m.ToolCalls) != len(o.ToolCalls) {
		return false
	}
	for i := range m.ContentParts {
		if m.ContentParts[i] != o.ContentParts[i] {
			return false
		}
	}
	for i := range m.ToolCalls {
		if m.ToolCalls[i] != o.ToolCalls[i] {
			return false
		}
	}
	return true
}

func (m *Message) containsMedia() bool {
	for _, p := range m.ContentParts {
		if p.Type == "media_marker" {
			return true
		}
	}
	return false
}

var errContentAndParts = &Error{Msg: "Cannot specify both content and content_parts"}

// RenderContent is render_content: the content, or the text parts joined
// by delim.
func (m *Message) RenderContent(delim string) (string, error) {
	if m.Content != "" && len(m.ContentParts) > 0 {
		return "", errContentAndParts
	}
	if m.Content != "" {
		return m.Content, nil
	}
	var b strings.Builder
	for _, p := range m.ContentParts {
		if p.Type == "text" {
			if b.Len() > 0 {
				b.WriteString(delim)
			}
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// joinParts joins content parts with newlines, none before or after a
// media marker (to_json_oaicompat's concat_typed_text and the content
// normalizer). Other part types are skipped.
func joinParts(types, texts func(i int) string, n int) string {
	var b strings.Builder
	lastMedia := false
	for i := 0; i < n; i++ {
		nl := true
		switch types(i) {
		case "text":
			nl = !lastMedia && b.Len() > 0
			lastMedia = false
		case "media_marker":
			nl = false
			lastMedia = true
		default:
			continue
		}
		if nl {
			b.WriteByte('\n')
		}
		b.WriteString(texts(i))
	}
	return b.String()
}

func str(s string) ojson.Value { return ojson.StringValue(s) }

// JSON is to_json_oaicompat: the message as the OpenAI API writes it.
// With concatTypedText (or a media part), typed parts become one string.
func (m *Message) JSON(concatTypedText bool) (ojson.Value, error) {
	if m.Content != "" && len(m.ContentParts) > 0 {
		return ojson.Value{}, errContentAndParts
	}
	j := ojson.ObjectValue(ojson.Member{Key: "role", Value: str(m.Role)})
	switch {
	case m.Content != "":
		j.Set("content", str(m.Content))
	case len(m.ContentParts) > 0 && (concatTypedText || m.containsMedia()):
		ps := m.ContentParts
		j.Set("content", str(joinParts(func(i int) string { return ps[i].Type }, func(i int) string { return ps[i].Text }, len(ps))))
	case len(m.ContentParts) > 0:
		parts := ojson.ArrayValue()
		for _, p := range m.ContentParts {
			parts.Append(ojson.ObjectValue(ojson.Member{Key: "type", Value: str(p.Type)}, ojson.Member{Key: "text", Value: str(p.Text)}))
		}
		j.Set("content", parts)
	default:
		j.Set("content", str(""))
	}
	if m.ReasoningContent != "" {
		j.Set("reasoning_content", str(m.ReasoningContent))
	}
	if m.ToolName != "" {
		j.Set("name", str(m.ToolName))
	}
	if m.ToolCallID != "" {
		j.Set("tool_call_id", str(m.ToolCallID))
	}
	if len(m.ToolCalls) > 0 {
		calls := ojson.ArrayValue()
		for _, tc := range m.ToolCalls {
			c := ojson.ObjectValue(ojson.Member{Key: "type", Value: str("function")},
				ojson.Member{Key: "function", Value: ojson.ObjectValue(
					ojson.Member{Key: "name", Value: str(tc.Name)},
					ojson.Member{Key: "arguments", Value: str(tc.Arguments)})})
			if tc.ID != "" {
				c.Set("id", str(tc.ID))
			}
			calls.Append(c)
		}
		j.Set("tool_calls", calls)
	}
	return j, nil
}

// SetToolCallIDs is set_tool_call_ids: each call without an id gets one
// from gen, once; ids holds the ids given so far, so that a call keeps
// its id from one partial parse to the next.
func (m *Message) SetToolCallIDs(ids *[]string, gen func() string) {
	for i := range m.ToolCalls {
		if len(*ids) <= i {
			id := m.ToolCalls[i].ID
			if id == "" {
				id = gen()
			}
			*ids = append(*ids, id)
		}
		m.ToolCalls[i].ID = (*ids)[i]
	}
}

// Diff is common_chat_msg_diff: what one parse of a streaming reply adds
// to the previous one. ToolCallIndex is -1 where no tool call changed.
type Diff struct {
	ReasoningContentDelta string
	ContentDelta          string
	ToolCallIndex         int
	ToolCallDelta         ToolCall
}

// DiffError is a parse that does not extend the previous one (what
// compute_diffs throws).
type DiffError struct{ Msg string }

func (e *DiffError) Error() string { return e.Msg }

func stringDiff(last, cur string) (string, error) {
	if last == "" {
		return cur, nil
	}
	if !strings.HasPrefix(cur, last) {
		if strings.HasPrefix(last, cur) {
			// the last parse ended on a partial stop word, this one on
			// the stop word, erased
			return "", nil
		}
		return "", &DiffError{Msg: "Invalid diff: '" + last + "' not found at start of '" + cur + "'"}
	}
	return cur[len(last):], nil
}

// Diffs is common_chat_msg_diff::compute_diffs: the deltas from prev to
// cur, a later parse of the same reply.
func Diffs(prev, cur *Message) ([]Diff, error) {
	var out []Diff
	if prev.ReasoningContent != cur.ReasoningContent {
		d, err := stringDiff(prev.ReasoningContent, cur.ReasoningContent)
		if err != nil {
			return nil, err
		}
		out = append(out, Diff{ReasoningContentDelta: d, ToolCallIndex: -1})
	}
	if prev.Content != cur.Content {
		d, err := stringDiff(prev.Content, cur.Content)
		if err != nil {
			return nil, err
		}
		out = append(out, Diff{ContentDelta: d, ToolCallIndex: -1})
	}
	if len(cur.ToolCalls) < len(prev.ToolCalls) {
		var b strings.Builder
		b.WriteString("Invalid diff: now finding less tool calls!\n")
		b.WriteString("  Previous (" + strconv.Itoa(len(prev.ToolCalls)) + "):\n")
		for _, tc := range prev.ToolCalls {
			b.WriteString("    - name: '" + tc.Name + "', args: '" + tc.Arguments + "'\n")
		}
		b.WriteString("  Current (" + strconv.Itoa(len(cur.ToolCalls)) + "):\n")
		for _, tc := range cur.ToolCalls {
			b.WriteString("    - name: '" + tc.Name + "', args: '" + tc.Arguments + "'\n")
		}
		b.WriteString("  Current msg text content:\n" + cur.Content + "\n")
		return nil, &DiffError{Msg: b.String()}
	}
	if n := len(prev.ToolCalls); n > 0 {
		idx := n - 1
		p, c := prev.ToolCalls[idx], cur.ToolCalls[idx]
		if p.Name != c.Name && p.Name != "" && c.Name != "" && !strings.HasPrefix(c.Name, p.Name) {
			return nil, &DiffError{Msg: "Invalid diff: tool call mismatch!"}
		}
		args, err := stringDiff(p.Arguments, c.Arguments)
		if err != nil {
			return nil, err
		}
		if args != "" || p.ID != c.ID || p.Name != c.Name {
			d := Diff{ToolCallIndex: idx}
			if p.ID != c.ID || p.Name != c.Name {
				d.ToolCallDelta.ID = c.ID
				d.ToolCallDelta.Name = c.Name
			}
			d.ToolCallDelta.Arguments = args
			out = append(out, d)
		}
	}
	for idx := len(prev.ToolCalls); idx < len(cur.ToolCalls); idx++ {
		out = append(out, Diff{ToolCallIndex: idx, ToolCallDelta: cur.ToolCalls[idx]})
	}
	return out, nil
}

// JSON is server_chat_msg_diff_to_json_oaicompat (llama-server's
// tools/server/server-chat.cpp): the delta of an OpenAI streaming chunk.
func (d *Diff) JSON() ojson.Value {
	delta := ojson.ObjectValue()
	if d.ReasoningContentDelta != "" {
		delta.Set("reasoning_content", str(d.ReasoningContentDelta))
	}
	if d.ContentDelta != "" {
		delta.Set("content", str(d.ContentDelta))
	}
	if d.ToolCallIndex >= 0 {
		tc := ojson.ObjectValue(ojson.Member{Key: "index", Value: ojson.UintValue(uint64(d.ToolCallIndex))})
		if d.ToolCallDelta.ID != "" {
			tc.Set("id", str(d.ToolCallDelta.ID))
			tc.Set("type", str("function"))
		}
		if d.ToolCallDelta.Name != "" || d.ToolCallDelta.Arguments != "" {
			fn := ojson.ObjectValue()
			if d.ToolCallDelta.Name != "" {
				fn.Set("name", str(d.ToolCallDelta.Name))
			}
			if d.ToolCallDelta.Arguments != "" {
				fn.Set("arguments", str(d.ToolCallDelta.Arguments))
			}
			tc.Set("function", fn)
		}
		delta.Set("tool_calls", ojson.ArrayValue(tc))
	}
	return delta
}
