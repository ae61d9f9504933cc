// Package native holds the pin of the native ggml release that ggload is
// built against: the llama.cpp tag, the ggml version, and the packages (with
// their sha256) that carry the prebuilt libraries and the source bundle.
//
// The pin lives in pin.env so that the shell scripts and the Go code read the
// same file. The libraries themselves are fetched or built into native/lib/,
// which git ignores.
package native

import (
	_ "embed"
	"strings"
)

//go:embed pin.env
var pinEnv string

// Pin is the parsed content of pin.env.
type Pin struct {
	LlamaCppTag string // llama.cpp release tag, e.g. "v0.5.0"
	GGMLVersion string // what ggml_version() returns, e.g. "0.25.1"
	NPMVersion  string // version of every npm package below
	Vars        map[string]string
}

// Load returns the pin.
func Load() Pin {
	vars := map[string]string{}
	for _, line := range strings.Split(pinEnv, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			vars[k] = v
		}
	}
	return Pin{
		LlamaCppTag: vars["LLAMA_CPP_TAG"],
		GGMLVersion: vars["GGML_VERSION"],
		NPMVersion:  vars["NPM_VERSION"],
		Vars:        vars,
	}
}

// Package returns the npm package name and sha256 for a platform directory
// name such as "linux-x64-vulkan", and false when the pin has no prebuilt
// package for it.
func (p Pin) Package(platform string) (name, sha256 string, ok bool) {
	key := strings.ReplaceAll(platform, "-", "_")
	name, ok1 := p.Vars["NPM_PACKAGE_"+key]
	sha, ok2 := p.Vars["NPM_SHA256_"+key]
	return name, sha, ok1 && ok2
}

// Platforms lists the platform directories that have a prebuilt package.
func (p Pin) Platforms() []string {
	var out []string
	for k := range p.Vars {
		if rest, ok := strings.CutPrefix(k, "NPM_PACKAGE_"); ok {
			out = append(out, strings.ReplaceAll(rest, "_", "-"))
		}
	}
	return out
}
