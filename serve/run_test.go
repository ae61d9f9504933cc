package serve_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/serve"
)

// A request alone in a slot gives the tokens ggload run gives with the
// same seed and options: greedy, the default chain seeded, and with
// penalties and DRY; on the engine's context of 4 slots (the slot chosen
// by the server's rules) and run's own context of one sequence.
func TestAloneIsRun(t *testing.T) {
	oracleOnly(t)
	path := textModel(t, "llama", "llama-spm", 2)
	e := newEngine(t, path, 1024, serve.Params{})
	prompt := tokens(t, e, "The quick brown fox jumps over the lazy dog")
	cases := []struct {
		name string
		set  func(*sample.Params)
	}{
		{"greedy", func(p *sample.Params) { p.Temp = 0 }},
		{"seeded", func(p *sample.Params) { p.Seed = 1234 }},
		{"penalties", func(p *sample.Params) {
			p.Seed, p.PenaltyRepeat, p.PenaltyLastN, p.DryMultiplier = 42, 1.3, 16, 0.8
		}},
	}
	if !all() {
		cases = cases[:2]
	}
	const n = 12
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := e.Defaults()
			c.set(&o.Sampling)
			o.NPredict = n
			o.ReturnTokens = true
			r, err := e.Complete(context.Background(), prompt, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := runTokens(t, path, 1024, prompt, o.Sampling, n)
			if !slices.Equal(r.Tokens, want) {
				t.Fatalf("engine %v, run %v", r.Tokens, want)
			}
			if r.Stop != serve.StopLimit && r.Stop != serve.StopEOS {
				t.Errorf("stop %v", r.Stop)
			}
		})
	}
}
