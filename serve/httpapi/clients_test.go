package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/place"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// sdkAnswers are what the official OpenAI Go SDK reads from a server:
// completions (at once and streamed), embeddings.
type sdkAnswers struct {
	text, streamed string
	finish         string
	usage          [3]int64
	chunks         int
	embedding      []float64
	embeddings     int
}

func openaiClient(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

func askCompletions(t *testing.T, base string) sdkAnswers {
	t.Helper()
	ctx := context.Background()
	c := openaiClient(base)
	var a sdkAnswers
	p := openai.CompletionNewParams{
		Model:       "tiny",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens:   openai.Int(12),
		Temperature: openai.Float(0),
	}
	res, err := c.Completions.New(ctx, p)
	if err != nil {
		t.Fatalf("%s: Completions.New: %v", base, err)
	}
	if len(res.Choices) != 1 {
		t.Fatalf("%s: %d choices", base, len(res.Choices))
	}
	a.text, a.finish = res.Choices[0].Text, string(res.Choices[0].FinishReason)
	a.usage = [3]int64{res.Usage.PromptTokens, res.Usage.CompletionTokens, res.Usage.TotalTokens}
	s := c.Completions.NewStreaming(ctx, p)
	var b strings.Builder
	for s.Next() {
		ch := s.Current()
		a.chunks++
		for _, x := range ch.Choices {
			b.WriteString(x.Text)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s: Completions.NewStreaming: %v", base, err)
	}
	a.streamed = b.String()
	return a
}

func askEmbeddings(t *testing.T, base string) sdkAnswers {
	t.Helper()
	ctx := context.Background()
	c := openaiClient(base)
	var a sdkAnswers
	e, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "tiny", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello world")}})
	if err != nil {
		t.Fatalf("%s: Embeddings.New: %v", base, err)
	}
	a.embedding = e.Data[0].Embedding
	m, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "tiny", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b", "c"}},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64})
	if err != nil {
		t.Fatalf("%s: Embeddings.New base64: %v", base, err)
	}
	a.embeddings = len(m.Data)
	return a
}

// The OpenAI Go SDK reads ggload's completions and embeddings as it reads
// llama-server's: the same text (greedy), the same text streamed chunk by
// chunk, the same usage and finish reason, the same vectors.
func TestOpenAIGoSDK(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	c := config{nCtx: 512, nParallel: 1, alias: "tiny"}
	ours, _ := newServer(t, path, c)
	theirs := startLlama(t, path, c)
	g, w := askCompletions(t, ours.URL), askCompletions(t, theirs.URL)
	if g.text == "" || g.text != g.streamed {
		t.Errorf("ours: text %q, streamed %q", g.text, g.streamed)
	}
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("completions: ours %+v, llama-server %+v", g, w)
	}
	bert := textModel(t, "bert", "bert-bge", 2)
	ce := config{nCtx: 512, nParallel: 2, nBatch: 128, embedding: true, pooling: place.PoolingMean, alias: "tiny"}
	ours2, _ := newServer(t, bert, ce)
	theirs2 := startLlama(t, bert, ce)
	ge, we := askEmbeddings(t, ours2.URL), askEmbeddings(t, theirs2.URL)
	if len(ge.embedding) == 0 || !slices.Equal(ge.embedding, we.embedding) || ge.embeddings != 3 || we.embeddings != 3 {
		t.Errorf("embeddings: ours %d values (%d inputs), llama-server %d (%d)", len(ge.embedding), ge.embeddings, len(we.embedding), we.embeddings)
	}
}
