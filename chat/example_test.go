package chat_test

import (
	"fmt"

	"github.com/ggload/ggload/chat"
)

// A template applied to a conversation, and the reply parsed.
func Example() {
	tm, err := chat.FromSource(chat.Options{Template: chat.ChatML})
	if err != nil {
		panic(err)
	}
	p, err := tm.Apply(&chat.Inputs{Messages: []chat.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Hi!"},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n%s\n", p.Prompt, p.Format)
	msg, err := p.Parse("Hello.", false)
	if err != nil {
		panic(err)
	}
	j, _ := msg.JSON(false)
	s, _ := j.Dump(-1)
	fmt.Println(s)
	// Output:
	// "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
	// peg-native
	// {"role":"assistant","content":"Hello."}
}

// A reply followed as it streams: the deltas an OpenAI streaming chunk
// carries.
func ExampleStream() {
	tm, _ := chat.FromSource(chat.Options{Template: chat.ChatML})
	p, _ := tm.Apply(&chat.Inputs{Messages: []chat.Message{{Role: "user", Content: "Count"}}})
	s := p.NewStream(nil)
	pieces := []string{"one", ", two", ", three"}
	for i, piece := range pieces {
		_, diffs, err := s.Add(piece, i < len(pieces)-1)
		if err != nil {
			panic(err)
		}
		for _, d := range diffs {
			js, _ := d.JSON().Dump(-1)
			fmt.Println(js)
		}
	}
	// Output:
	// {"content":"one"}
	// {"content":", two"}
	// {"content":", three"}
}
