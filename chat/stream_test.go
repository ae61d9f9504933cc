package chat

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"
)

// A reply streamed in pieces: the deltas add up to the message the whole
// reply parses to, tool calls keep their first ids, and the stream's
// last message is that parse (but for the ids). The replies are the pin's test-chat.cpp's
// (each distinct whole one, with the params it was parsed with), cut at
// random.
func TestStreamDeltas(t *testing.T) {
	rec := pinTestChat(t)
	var us ours
	params := map[int]*Params{}
	rng := rand.New(rand.NewSource(7))
	seen := map[string]bool{}
	streamed, refused := 0, 0
	for _, p := range rec.parses {
		if p.partial || p.out.err != "" || p.apply < 0 {
			continue
		}
		k := fmt.Sprint(p.apply, p.genPrompt, p.format, p.input)
		if seen[k] {
			continue
		}
		seen[k] = true
		pp, ok := params[p.apply]
		if !ok {
			a := &rec.applies[p.apply]
			got := us.apply(&request{src: a.src, in: a.in})
			if got.err == "" {
				pp = &got.params.Params
			}
			params[p.apply] = pp
		}
		if pp == nil {
			continue
		}
		q := *pp
		q.GenerationPrompt, q.Format = p.genPrompt, p.format
		n := 0
		s := q.NewStream(func() string { n++; return fmt.Sprintf("id%d", n) })
		var acc Message
		text := p.input
		var err error
		for len(text) > 0 && err == nil {
			k := min(len(text), 1+rng.Intn(8))
			var ds []Diff
			_, ds, err = s.Add(text[:k], k < len(text))
			text = text[k:]
			for _, d := range ds {
				acc.ReasoningContent += d.ReasoningContentDelta
				acc.Content += d.ContentDelta
				if d.ToolCallIndex < 0 {
					continue
				}
				for len(acc.ToolCalls) <= d.ToolCallIndex {
					acc.ToolCalls = append(acc.ToolCalls, ToolCall{})
				}
				c := &acc.ToolCalls[d.ToolCallIndex]
				if d.ToolCallDelta.Name != "" {
					c.Name = d.ToolCallDelta.Name
				}
				if d.ToolCallDelta.ID != "" {
					c.ID = d.ToolCallDelta.ID
				}
				c.Arguments += d.ToolCallDelta.Arguments
			}
		}
		var de *DiffError
		if errors.As(err, &de) {
			refused++ // a partial parse the next one does not extend: compute_diffs throws too
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", p.input, err)
			continue
		}
		streamed++
		want := p.out.msg
		final := s.Message()
		// (a call keeps the id it had when it first appeared, as
		// set_tool_call_ids keeps it: generated where the text had none
		// yet, even if one comes later)
		for i := range want.ToolCalls {
			if i < len(final.ToolCalls) {
				want.ToolCalls[i].ID = final.ToolCalls[i].ID
			}
		}
		acc.Role = final.Role
		if !final.Equal(&want) || !acc.Equal(&final) {
			t.Errorf("%q:\n streamed %+v\n    deltas %+v\n     whole %+v", p.input, final, acc, want)
		}
	}
	t.Logf("%d replies streamed, %d whose deltas the pin would refuse too", streamed, refused)
}
