package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/native"
)

func init() {
	register(command{"fetch", "[SET...]", "install the pinned prebuilt native libraries where every ggload finds them, without npm", runFetch})
	optionSets["fetch"] = func() *optionSet { return fetchOptions(new(bindings.InstallOptions), new(string)) }
}

func fetchOptions(opts *bindings.InstallOptions, dir *string) *optionSet {
	s := newOptionSet("fetch",
		"Installs the pinned prebuilt native libraries as scripts/fetch-native.sh does, without npm: each SET's package (native/pin.env) is downloaded from an npm registry, checked against its pinned sha256 and unpacked into the user cache, where every ggload looks. SETs: "+strings.Join(pinnedSets(), ", ")+"; with none named, the sets this machine can use. A set installed from the pinned tarball is left alone; the tarball is kept in the user cache and shared with the scripts.\n\n"+
			"ggload names no registry of its own: --registry, else GGLOAD_NPM_REGISTRY, else npm's own setting as npm reads it (npm_config_registry, then registry= in ~/.npmrc). With npm installed: --registry \"$(npm config get registry)\".",
		"ggload fetch [SET...] [--registry URL] [--dir DIR]")
	s.add(&option{names: []string{"--registry"}, value: "URL",
		help: "the npm registry's base URL: https (plain http to a loopback address only); the tarball is URL/<package>/-/<name>-<version>.tgz (default: $GGLOAD_NPM_REGISTRY, then $npm_config_registry, then registry= in ~/.npmrc)",
		set:  func(v string) error { opts.Registry = v; return nil }})
	s.add(&option{names: []string{"--dir"}, value: "DIR",
		help: "install each set into DIR/SET (default: <user cache>/ggload/lib/" + pinTag() + ", where every ggload looks)",
		set: func(v string) error {
			if v == "" {
				return fmt.Errorf("want a directory")
			}
			*dir = v
			return nil
		}})
	return s
}

func runFetch(ctx context.Context, args []string, stdout io.Writer) error {
	var opts bindings.InstallOptions
	var dir string
	s := fetchOptions(&opts, &dir)
	sets, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	pinned := pinnedSets()
	for _, set := range sets {
		if !slices.Contains(pinned, set) {
			msg := fmt.Sprintf("no prebuilt set %q is pinned (pinned: %s; other platforms: scripts/build-native.sh)", set, strings.Join(pinned, ", "))
			if n := nearest(set, pinned); n != "" {
				msg += fmt.Sprintf("; did you mean %s?", n)
			}
			return s.errorf("%s", msg)
		}
	}
	if len(sets) == 0 {
		if sets, err = defaultSets(stdout); err != nil {
			return err
		}
	}
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return err
		}
	}
	done := map[string]bool{}
	for _, set := range sets {
		if done[set] {
			continue
		}
		done[set] = true
		res, err := bindings.Install(ctx, set, dir, opts)
		if err != nil {
			return err
		}
		switch {
		case res.UpToDate:
			fmt.Fprintf(stdout, "%s: up to date in %s (%s)\n", set, res.Dir, res.Package)
		case res.URL != "":
			fmt.Fprintf(stdout, "%s: installed %s in %s (%s from %s)\n", set, plural(len(res.Files), "file"), res.Dir, res.Package, res.URL)
		default:
			fmt.Fprintf(stdout, "%s: installed %s in %s (%s from the cached %s)\n", set, plural(len(res.Files), "file"), res.Dir, res.Package, res.Tarball)
		}
	}
	return nil
}

// defaultSets are the pinned sets this machine can use; it says which it
// took and which it left, and why.
func defaultSets(stdout io.Writer) ([]string, error) {
	var take, took, left []string
	for _, s := range bindings.PrebuiltSets() {
		if s.Default {
			take = append(take, s.Name)
			took = append(took, fmt.Sprintf("%s (%s)", s.Name, s.Why))
		} else {
			left = append(left, fmt.Sprintf("%s (%s)", s.Name, s.Why))
		}
	}
	if len(take) == 0 {
		p := bindings.Platform()
		return nil, fmt.Errorf("no prebuilt set is pinned for %s (pinned: %s): build one with scripts/build-native.sh %s, or set GGLOAD_LIB_DIR to a llama.cpp build's library directory", p, strings.Join(pinnedSets(), ", "), p)
	}
	fmt.Fprintf(stdout, "no set named: fetching %s\n", strings.Join(took, ", "))
	if len(left) > 0 {
		fmt.Fprintf(stdout, "not fetched: %s\n", strings.Join(left, ", "))
	}
	return take, nil
}

// pinnedSets are the sets native/pin.env pins a prebuilt package for.
func pinnedSets() []string {
	sets := native.Load().Platforms()
	sort.Strings(sets)
	return sets
}
