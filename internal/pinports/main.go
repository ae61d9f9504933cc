// Command pinports lists ggload's hand ports of the pinned llama.cpp and
// what changed upstream under them. A hand-ported Go file starts with a
// header that names the pin's files it ports and the release it was last
// held to:
//
//	// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): llm_tokenizer_bpe.
//
// Several files may be named (src/llama-kv-cache.cpp and
// src/llama-kv-cache-msa.cpp); a bare name takes the folder of the path
// before it (caps.h and caps.cpp).
//
//	pinports [-root DIR] list                the ports: each Go file, its release and its pin files
//	pinports [-root DIR] diff OLD NEW        the upstream diff (diff -u) of every pin file a port
//	                                         shadows, between two source trees, grouped by pin file
//
// scripts/move-pin.sh runs it; PIN.md says what to do with its output.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Port is one hand-ported Go file: its path from the repository root, the
// release its header names, and the pin's files it ports.
type Port struct {
	File     string
	Tag      string
	PinFiles []string
}

var (
	tagRE  = regexp.MustCompile(`\((v\d+\.\d+\.\d+[^)]*)\)`)
	fileRE = regexp.MustCompile(`[A-Za-z0-9_][A-Za-z0-9_./-]*\.(?:cpp|hpp|h|c|cu|m|py)\b`)
)

// parseHeader reads the port header of a Go file's source: its first
// comment paragraph, when it begins with "// Port of". ok is false for a
// file without one.
func parseHeader(src []byte) (tag string, files []string, ok bool, err error) {
	var text []string
	for _, l := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(l, "//") || strings.HasPrefix(l, "//go:") {
			break
		}
		text = append(text, strings.TrimSpace(strings.TrimPrefix(l, "//")))
	}
	if len(text) == 0 || !strings.HasPrefix(text[0], "Port of") {
		return "", nil, false, nil
	}
	h := strings.Join(text, " ")
	m := tagRE.FindStringSubmatch(h)
	if m == nil {
		return "", nil, true, fmt.Errorf("its port header names no release, such as (v0.5.0)")
	}
	dir := ""
	for _, f := range fileRE.FindAllString(h[:strings.Index(h, m[0])], -1) {
		switch {
		case strings.Contains(f, "/"):
			dir = path.Dir(f)
		case dir == "":
			continue // "llama.cpp", the project
		default:
			f = dir + "/" + f
		}
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return "", nil, true, fmt.Errorf("its port header names no file of the pin before %s", m[0])
	}
	return m[1], files, true, nil
}

// Scan finds the ports under root: every Go file but tests, outside
// testdata, lab and hidden folders.
func Scan(root string) ([]Port, error) {
	var ports []Port
	var errs []error
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "lab" || name == "native") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		tag, files, ok, err := parseHeader(src)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rel, err))
		}
		if ok && err == nil {
			ports = append(ports, Port{File: rel, Tag: tag, PinFiles: files})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].File < ports[j].File })
	return ports, errors.Join(errs...)
}

// shadows maps each pin file to the ports that shadow it.
func shadows(ports []Port) (pinFiles []string, by map[string][]string) {
	by = map[string][]string{}
	for _, p := range ports {
		for _, f := range p.PinFiles {
			if by[f] == nil {
				pinFiles = append(pinFiles, f)
			}
			by[f] = append(by[f], p.File)
		}
	}
	sort.Strings(pinFiles)
	return pinFiles, by
}

// list prints the ports.
func list(w io.Writer, ports []Port) {
	for _, p := range ports {
		fmt.Fprintf(w, "%-45s %-8s %s\n", p.File, p.Tag, strings.Join(p.PinFiles, " "))
	}
	files, _ := shadows(ports)
	fmt.Fprintf(w, "%d hand-ported files shadow %d files of the pin\n", len(ports), len(files))
}

// diff prints, for every pin file a port shadows, whether it changed
// between the trees old and new, and the diff where it did. It returns
// the number of pin files that changed or went.
func diff(w io.Writer, ports []Port, old, new string) (int, error) {
	files, by := shadows(ports)
	var changed []string
	status := map[string]string{}
	for _, f := range files {
		a, errA := os.ReadFile(filepath.Join(old, f))
		b, errB := os.ReadFile(filepath.Join(new, f))
		switch {
		case errA != nil && errB != nil:
			status[f] = "in neither tree"
		case errA != nil:
			status[f] = "new upstream (not in the old tree)"
		case errB != nil:
			status[f] = "gone upstream"
		case !bytes.Equal(a, b):
			status[f] = "changed"
		default:
			continue
		}
		changed = append(changed, f)
	}
	fmt.Fprintf(w, "%d of the %d pin files that %d ports shadow differ between\n  %s\n  %s\n", len(changed), len(files), len(ports), old, new)
	for _, f := range changed {
		fmt.Fprintf(w, "  %-45s %s: %s\n", f, status[f], strings.Join(by[f], ", "))
	}
	for _, f := range changed {
		fmt.Fprintf(w, "\n======== %s (%s), shadowed by %s\n", f, status[f], strings.Join(by[f], ", "))
		if status[f] != "changed" {
			continue
		}
		cmd := exec.Command("diff", "-u", "--label", "old/"+f, "--label", "new/"+f, filepath.Join(old, f), filepath.Join(new, f))
		cmd.Stdout, cmd.Stderr = w, os.Stderr
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				return 0, fmt.Errorf("diff %s: %w", f, err)
			}
		}
	}
	return len(changed), nil
}

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: pinports [-root DIR] list | diff OLD_TREE NEW_TREE")
	}
	flag.Parse()
	ports, err := Scan(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pinports:", err)
		os.Exit(1)
	}
	switch args := flag.Args(); {
	case len(args) == 1 && args[0] == "list":
		list(os.Stdout, ports)
	case len(args) == 3 && args[0] == "diff":
		if _, err := diff(os.Stdout, ports, args[1], args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "pinports:", err)
			os.Exit(1)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}
