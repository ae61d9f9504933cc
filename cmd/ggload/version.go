package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/ggload/ggload/native"
)

// pinTag is the pinned llama.cpp release.
func pinTag() string { return native.Load().LlamaCppTag }

// version is ggload's version as the build records it: the module version
// (or "devel"), and the commit it was built from where known.
func version() string {
	v, commit, dirty := "devel", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit != "" {
		v += " (" + commit
		if dirty {
			v += ", modified"
		}
		v += ")"
	}
	return v
}

// printVersion prints ggload's version and the native pin it is built
// for.
func printVersion(w io.Writer) {
	pin := native.Load()
	fmt.Fprintf(w, "ggload %s, %s %s/%s\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "native pin: llama.cpp %s, ggml %s (npm packages %s)\n", pin.LlamaCppTag, pin.GGMLVersion, pin.NPMVersion)
}
