package ggload

import "github.com/ggload/ggload/loader"

// LoaderModel is the model's loaded weights, for tests that serve the
// same model over llama-server's HTTP API.
func LoaderModel(m *Model) *loader.Model { return m.lm }
