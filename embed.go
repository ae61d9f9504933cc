package ggload

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Embed gives each text's embedding as llama-server's /v1/embeddings
// gives it: the text tokenized with the model's BOS (and EOS where it
// adds one), pooled as the model pools (Options.Place.Context.Pooling),
// normalized to unit length (Options.Serve.EmbdNormalize). The texts
// run at once in the engine's slots; the first error ends the others.
// The model must be opened with Options.Place.Context.Embeddings.
func (m *Model) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := m.embed(ctx, texts)
	return vecs, m.fail("embed", err)
}

func (m *Model) embed(ctx context.Context, texts []string) ([][]float32, error) {
	info := m.e.Info()
	if !info.Embeddings {
		return nil, errors.New("the model was opened without Options.Place.Context.Embeddings (llama-server's --embeddings)")
	}
	if info.Pooling == 0 {
		return nil, errors.New("Options.Place.Context.Pooling none gives one vector per token: use Engine().Embed for them")
	}
	v := m.e.Vocab()
	prompts := make([][]int32, len(texts))
	for i, t := range texts {
		toks, err := v.Tokenize(t, true, true)
		if err != nil {
			return nil, fmt.Errorf("text %d: %w", i, err)
		}
		if len(toks) == 0 {
			return nil, fmt.Errorf("text %d: Input content cannot be empty", i)
		}
		prompts[i] = toks
	}
	o := m.e.Defaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([][]float32, len(texts))
	errs := make([]error, len(texts))
	var wg sync.WaitGroup
	for i := range prompts {
		wg.Go(func() {
			e, err := m.e.Embed(ctx, prompts[i], o)
			if err != nil {
				errs[i] = fmt.Errorf("text %d: %w", i, err)
				cancel()
				return
			}
			if len(e.Vectors) > 0 {
				out[i] = e.Vectors[0]
			}
		})
	}
	wg.Wait()
	// the first error by text, not one the cancellation caused
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return out, nil
}
