package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestInfo(t *testing.T) {
	var out bytes.Buffer
	if err := info(&out, "../../loader/testdata/tiny-llama.gguf"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"architecture llama, 21 tensors",
		"general.architecture", `"llama"`,
		"llama.block_count", "token_embd.weight", "q8_0", "blk.1.ffn_down.weight", "q4_0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	if err := info(&out, "no-such.gguf"); err == nil {
		t.Error("a missing file gave no error")
	}
}
