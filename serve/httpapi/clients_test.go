package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
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
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0), option.WithHTTPClient(oneShot))
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

// sameCompletionsSDK: the OpenAI Go SDK reads ggload's completions as
// it reads llama-server's: the same text (greedy), the same text streamed
// chunk by chunk, the same usage and finish reason.
func sameCompletionsSDK(t *testing.T, ours, theirs string) {
	g, w := askCompletions(t, ours), askCompletions(t, theirs)
	if g.text == "" || g.text != g.streamed {
		t.Errorf("ours: text %q, streamed %q", g.text, g.streamed)
	}
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("completions: ours %+v, llama-server %+v", g, w)
	}
}

// sameEmbeddingsSDK: the OpenAI Go SDK reads the same vectors of both.
func sameEmbeddingsSDK(t *testing.T, ours, theirs string) {
	ge, we := askEmbeddings(t, ours), askEmbeddings(t, theirs)
	if len(ge.embedding) == 0 || !slices.Equal(ge.embedding, we.embedding) || ge.embeddings != 3 || we.embeddings != 3 {
		t.Errorf("embeddings: ours %d values (%d inputs), llama-server %d (%d)", len(ge.embedding), ge.embeddings, len(we.embedding), we.embeddings)
	}
}

// chatAnswers are what the SDKs read of chat replies.
type chatAnswers struct {
	text, streamed, finish string
	toolsText, toolsFinish string
	usage                  [3]int64
	anthropic, anthStream  string
	anthStop               string
	anthUsage              [2]int64
	anthTokens             int64
}

func askChat(t *testing.T, base string) chatAnswers {
	t.Helper()
	ctx := context.Background()
	c := openaiClient(base)
	var a chatAnswers
	p := openai.ChatCompletionNewParams{
		Model:       "tiny",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello there")},
		MaxTokens:   openai.Int(10),
		Temperature: openai.Float(0),
	}
	res, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatalf("%s: Chat.Completions.New: %v", base, err)
	}
	a.text, a.finish = res.Choices[0].Message.Content, string(res.Choices[0].FinishReason)
	a.usage = [3]int64{res.Usage.PromptTokens, res.Usage.CompletionTokens, res.Usage.TotalTokens}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(ctx, p)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s: Chat.Completions.NewStreaming: %v", base, err)
	}
	if len(acc.Choices) > 0 {
		a.streamed = acc.Choices[0].Message.Content
	}
	// tools: offered to the model, which may call them
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("the weather of a city"),
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	})}
	tr, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatalf("%s: Chat.Completions.New with tools: %v", base, err)
	}
	a.toolsText, a.toolsFinish = tr.Choices[0].Message.Content, string(tr.Choices[0].FinishReason)
	for _, tc := range tr.Choices[0].Message.ToolCalls {
		a.toolsText += " call:" + tc.Function.Name + tc.Function.Arguments
	}

	ac := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("sk-test"), aoption.WithMaxRetries(0), aoption.WithJSONSet("temperature", 0), aoption.WithHTTPClient(oneShot))
	ap := anthropic.MessageNewParams{Model: "tiny", MaxTokens: 8, System: []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello there"))}}
	m, err := ac.Messages.New(ctx, ap)
	if err != nil {
		t.Fatalf("%s: Messages.New: %v", base, err)
	}
	for _, b := range m.Content {
		a.anthropic += b.Text
	}
	a.anthStop = string(m.StopReason)
	a.anthUsage = [2]int64{m.Usage.InputTokens, m.Usage.OutputTokens}
	as := ac.Messages.NewStreaming(ctx, ap)
	msg := anthropic.Message{}
	for as.Next() {
		if err := msg.Accumulate(as.Current()); err != nil {
			t.Fatalf("%s: Messages.NewStreaming: %v", base, err)
		}
	}
	if err := as.Err(); err != nil {
		t.Fatalf("%s: Messages.NewStreaming: %v", base, err)
	}
	for _, b := range msg.Content {
		a.anthStream += b.Text
	}
	ct, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "tiny",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello there"))}})
	if err != nil {
		t.Fatalf("%s: Messages.CountTokens: %v", base, err)
	}
	a.anthTokens = ct.InputTokens
	return a
}

// sameChatSDKs: the OpenAI and Anthropic Go SDKs chat with ggload as
// with llama-server: the same replies at once and streamed, with tools
// offered, Anthropic's messages and token counts.
func sameChatSDKs(t *testing.T, ours, theirs string) {
	g, w := askChat(t, ours), askChat(t, theirs)
	if g.text == "" || g.text != g.streamed || g.anthropic != g.anthStream || g.anthTokens == 0 {
		t.Errorf("ours: %+v", g)
	}
	if g != w {
		t.Errorf("ours %+v\nllama-server %+v", g, w)
	}
}

// jsonAnswers are what the OpenAI Go SDK reads of JSON output
// (response_format json_schema): the reply at once and streamed, and why
// it ended.
type jsonAnswers struct {
	text, streamed, finish string
}

func askJSON(t *testing.T, base string) jsonAnswers {
	t.Helper()
	ctx := context.Background()
	c := openaiClient(base)
	p := openai.ChatCompletionNewParams{
		Model:       "tiny",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Is it sunny?")},
		MaxTokens:   openai.Int(48),
		Temperature: openai.Float(0),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "answer", Schema: map[string]any{
				"type": "object", "properties": map[string]any{"sunny": map[string]any{"type": "boolean"}},
				"required": []string{"sunny"}, "additionalProperties": false,
			}},
		}},
	}
	var a jsonAnswers
	res, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatalf("%s: Chat.Completions.New with response_format: %v", base, err)
	}
	a.text, a.finish = res.Choices[0].Message.Content, string(res.Choices[0].FinishReason)
	s := c.Chat.Completions.NewStreaming(ctx, p)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s: Chat.Completions.NewStreaming with response_format: %v", base, err)
	}
	if len(acc.Choices) > 0 {
		a.streamed = acc.Choices[0].Message.Content
	}
	return a
}

// sameJSONSDK: the OpenAI Go SDK asks both servers for JSON output with
// a schema and reads the same reply, one that the schema holds.
func sameJSONSDK(t *testing.T, ours, theirs string) {
	g, w := askJSON(t, ours), askJSON(t, theirs)
	var v struct {
		Sunny *bool `json:"sunny"`
	}
	if err := json.Unmarshal([]byte(g.text), &v); err != nil || v.Sunny == nil || g.finish != "stop" || g.text != g.streamed {
		t.Errorf("ours: %+v, not the schema's JSON (%v)", g, err)
	}
	if g != w {
		t.Errorf("ours %+v\nllama-server %+v", g, w)
	}
}
