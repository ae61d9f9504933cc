package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/ggload/ggload/gguf/httpsrc"
)

// hubFlags are llama.cpp's -hf, -hff and --offline: a model brought from
// a hub repository into the Hugging Face cache (httpsrc.Pull), then
// loaded from there as a local file. The token is -hft's (placeFlags, or
// the command's own).
type hubFlags struct {
	repo    string // -hf OWNER/NAME[:QUANT]
	file    string // -hff
	offline bool   // --offline
	// mmproj: the command takes the repository's projector too, as
	// llama-server and llama-mtmd-cli do (plan and load; not run, which
	// is llama-completion, nor tokenize)
	mmproj bool
	token  string // -hft, where the command has no placeFlags (addToken)
}

// addToken registers -hft for a command without placeFlags.
func (h *hubFlags) addToken(s *optionSet) {
	s.add(&option{names: []string{"-hft", "--hf-token"}, value: "TOKEN",
		help: "the bearer token sent to the -hf repository's hub (default: $HF_TOKEN)", secret: true,
		set: func(v string) error { h.token = v; return nil }})
}

// local brings -hf's model for a command that reads a local file (no
// projector), and returns its path; model is the path the command was
// given otherwise.
func (h *hubFlags) local(ctx context.Context, s *optionSet, model string) (string, error) {
	if err := h.check(s, model); err != nil || h.repo == "" {
		return model, err
	}
	m, err := h.pull(ctx, httpsrc.Options{Token: h.token}, false, os.Stderr)
	if err != nil {
		return "", err
	}
	return m.Path(), nil
}

// add registers the options on s.
func (h *hubFlags) add(s *optionSet) {
	s.add(&option{names: []string{"-hf", "-hfr", "--hf-repo"}, value: "<user>/<model>[:quant]",
		help: "bring the model from a Hugging Face repository as llama.cpp's -hf does, into the Hugging Face cache it shares with llama.cpp and huggingface_hub ($LLAMA_CACHE, else $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub), then load it from there; quant is optional, case-insensitive, default Q4_K_M, then Q8_0, then the repository's first model file; every split of it comes, and the projector where the command takes one (--no-mmproj: not); the hub is $MODEL_ENDPOINT, else $HF_ENDPOINT, else the Hugging Face Hub\n" +
			"example: ggml-org/gemma-3-1b-it-GGUF:Q4_K_M",
		set: func(v string) error {
			if _, _, err := httpsrc.ParseRepo(v); err != nil {
				return fmt.Errorf("want <user>/<model>[:quant], of letters, digits and _, with ., - or / between them")
			}
			h.repo = v
			return nil
		}})
	s.add(&option{names: []string{"-hff", "--hf-file"}, value: "FILE",
		help: "the -hf repository's file to bring, by its path in the repository; it overrides the quant of -hf",
		set: func(v string) error {
			if v == "" {
				return fmt.Errorf("want a file of the repository")
			}
			h.file = v
			return nil
		}})
	s.add(&option{names: []string{"--offline"},
		help: "ask no hub: -hf takes the files the cache holds, or fails naming what it lacks",
		on:   func(on bool) error { h.offline = on; return nil }})
}

// check refuses -hff without -hf, and -hf beside another model.
func (h *hubFlags) check(s *optionSet, others ...string) error {
	if h.repo == "" {
		if h.file != "" {
			return s.errorf("-hff %s names a file of the -hf repository: give -hf too", h.file)
		}
		return nil
	}
	for _, o := range others {
		if o != "" {
			return s.errorf("-hf %s and %s: give one model", h.repo, o)
		}
	}
	return nil
}

// pull brings the model (and, where the command takes it, the
// projector), with a bar by bytes on a terminal, and says where it is.
func (h *hubFlags) pull(ctx context.Context, o httpsrc.Options, mmproj bool, stderr io.Writer) (*httpsrc.HubModel, error) {
	stderr = safe(stderr)
	done := downloadBar(&o, stderr)
	m, err := httpsrc.Pull(ctx, h.repo, httpsrc.HubOptions{Options: o, File: h.file, Mmproj: mmproj, Offline: h.offline})
	done()
	if err != nil {
		return nil, fmt.Errorf("-hf %s: %w", h.repo, err)
	}
	from := "from the hub, commit " + short(m.Commit)
	if m.Listed == "cache" {
		from = "from the cache (" + m.Why + ")"
	}
	fmt.Fprintf(stderr, "ggload: -hf %s: %s, %s\n", h.repo, m.Path(), from)
	if m.Mmproj != "" {
		fmt.Fprintf(stderr, "ggload: -hf %s: projector %s\n", h.repo, m.Mmproj)
	}
	return m, nil
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// pullModel brings -hf's model, and its projector where the command
// takes one and none was given (-mm, -mmu) or refused (--no-mmproj), and
// returns the model's path.
func (f *placeFlags) pullModel(ctx context.Context) (string, error) {
	mmproj := f.hub.mmproj && f.mmproj.auto && !f.mmproj.given()
	m, err := f.hub.pull(ctx, f.httpOptions(), mmproj, os.Stderr)
	if err != nil {
		return "", err
	}
	if m.Mmproj != "" {
		f.mmproj.path = m.Mmproj
	}
	return m.Path(), nil
}
