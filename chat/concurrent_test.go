package chat

import (
	"sync"
	"testing"
)

// One Templates, applied and its replies parsed by many goroutines at
// once from its first use (the analysis it keeps is made once), gives
// each what it gives alone. (go test -race runs this package.)
func TestConcurrentUse(t *testing.T) {
	names, srcs := pinTemplates(t)
	in := benchConversation()
	replies := []string{"Hello", "<think>x</think>y", "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}\n</tool_call>"}
	for i, name := range names {
		if i%7 != 0 {
			continue
		}
		alone, err := FromSource(Options{Template: srcs[name], BOS: "<s>", EOS: "</s>", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		want, err := alone.Apply(&in)
		if err != nil {
			continue
		}
		shared, err := FromSource(Options{Template: srcs[name], BOS: "<s>", EOS: "</s>", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := shared.Apply(&in)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				if p.Prompt != want.Prompt || p.Grammar != want.Grammar {
					t.Errorf("%s: a concurrent Apply differs", name)
				}
				if _, err := shared.SupportsThinking(); err != nil {
					t.Errorf("%s: %v", name, err)
				}
				for _, r := range replies {
					got, gerr := p.Parse(r, false)
					w, werr := want.Parse(r, false)
					if (gerr == nil) != (werr == nil) || !got.Equal(&w) {
						t.Errorf("%s: a concurrent Parse of %q differs", name, r)
					}
				}
			}()
		}
		wg.Wait()
	}
}
