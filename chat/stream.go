// Port of llama.cpp tools/server/server-task.cpp (v0.5.0):
// task_result_state::update_chat_msg, and gen_tool_call_id of
// server-common.cpp: a reply followed as it streams.

package chat

import (
	"crypto/rand"
	"math/big"
)

// Stream is a reply parsed as it streams, as llama-server follows one:
// after each piece the text so far is parsed (partial until the last),
// the tool calls keep the ids they were first given, and the deltas from
// the last parse are what a streaming chunk sends.
type Stream struct {
	params *Params
	text   string
	msg    Message
	ids    []string
	genID  func() string
}

// NewStream starts a stream of a reply to these params. genID gives a
// tool call without an id of its own one; nil is RandomToolCallID.
func (p *Params) NewStream(genID func() string) *Stream {
	if genID == nil {
		genID = RandomToolCallID
	}
	return &Stream{params: p, msg: Message{}, genID: genID}
}

// Add adds a piece of the reply and parses the text so far; partial is
// false for the last piece. It returns the message so far and the deltas
// since the last parse. A parse that finds nothing leaves the message as
// it was, with no deltas.
func (s *Stream) Add(piece string, partial bool) (Message, []Diff, error) {
	s.text += piece
	prev := s.msg
	msg, err := s.params.Parse(s.text, partial)
	if err != nil {
		return s.msg, nil, err
	}
	if msg.Empty() {
		return s.msg, nil, nil
	}
	msg.SetToolCallIDs(&s.ids, s.genID)
	s.msg = msg
	diffs, err := Diffs(&prev, &s.msg)
	return s.msg, diffs, err
}

// Text is the reply so far.
func (s *Stream) Text() string { return s.text }

// Message is the reply so far, parsed.
func (s *Stream) Message() Message { return s.msg }

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// RandomToolCallID is gen_tool_call_id: 32 random letters and digits.
func RandomToolCallID() string {
	b := make([]byte, 32)
	n := big.NewInt(int64(len(idAlphabet)))
	for i := range b {
		k, err := rand.Int(rand.Reader, n)
		if err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		b[i] = idAlphabet[k.Int64()]
	}
	return string(b)
}
