// Command testsum reads `go test -json` and says what happened, for
// scripts/test.sh: while the tests run, a line per package and the output
// of every failed test; at the end, one line of counts, then every skip
// reason with how many tests it skipped and the command that removes it.
//
//	go test -json ./... | testsum -record run.jsonl   (passes the run through)
//	testsum -summary run.jsonl [race.jsonl ...]       (the summary; exit 1 on a failure)
//
// Counts are of leaf tests: a test with subtests counts through them.
// Skips for hardware no script can bring (a CUDA or Metal GPU) are
// expected on a machine without one; the summary says whether any other
// skip is left.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of test2json's output.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	record := flag.String("record", "", "pass the run on stdin through, writing its events to this file")
	summary := flag.Bool("summary", false, "summarize the recorded runs named as arguments")
	flag.Parse()
	switch {
	case *record != "":
		if err := pass(os.Stdin, os.Stdout, *record); err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
	case *summary:
		var runs []*run
		for _, f := range flag.Args() {
			r, err := load(f)
			if err != nil {
				fmt.Fprintln(os.Stderr, "testsum:", err)
				os.Exit(2)
			}
			runs = append(runs, r)
		}
		if report(os.Stdout, runs) {
			os.Exit(1)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

// pass copies the events to path and prints what a reader of the run
// wants: each package's result and the output of each failed test.
// Lines that are not events (a build failure's) are printed as they come.
func pass(in io.Reader, out io.Writer, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	outputs := map[string][]string{} // test → its output, until it ends
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(out, string(line))
			continue
		}
		w.Write(line)
		w.WriteByte('\n')
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output", "build-output":
			if e.Test == "" {
				// package output: the ok/FAIL line and what a failed package printed
				if e.Action == "build-output" || strings.HasPrefix(e.Output, "ok ") || strings.HasPrefix(e.Output, "FAIL") ||
					strings.HasPrefix(e.Output, "--- FAIL") || strings.HasPrefix(e.Output, "panic:") {
					fmt.Fprint(out, e.Output)
				}
				continue
			}
			outputs[key] = append(outputs[key], e.Output)
		case "fail":
			if e.Test != "" {
				fmt.Fprint(out, strings.Join(outputs[key], ""))
			}
			delete(outputs, key)
		case "pass", "skip":
			delete(outputs, key)
		}
	}
	return sc.Err()
}

// run is one recorded `go test -json`.
type run struct {
	name    string
	results map[string]*result // package + " " + test
	order   []string
}

type result struct {
	pkg, test string
	action    string
	output    []string
	children  int
}

func load(path string) (*run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &run{name: path, results: map[string]*result{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" {
			continue
		}
		key := e.Package + " " + e.Test
		res := r.results[key]
		if res == nil {
			res = &result{pkg: e.Package, test: e.Test}
			r.results[key] = res
			r.order = append(r.order, key)
			if i := strings.LastIndexByte(e.Test, '/'); i > 0 {
				if p := r.results[e.Package+" "+e.Test[:i]]; p != nil {
					p.children++
				}
			}
		}
		switch e.Action {
		case "output":
			res.output = append(res.output, e.Output)
		case "pass", "fail", "skip":
			res.action = e.Action
		}
	}
	return r, sc.Err()
}

// fixes says, for each component a skip names ("<component> missing: ..."),
// what removes the skip.
var fixes = map[string]string{
	"cpu":    "scripts/fetch-native.sh linux-x64 (or linux-x64-vulkan)",
	"vulkan": "apt-get install libvulkan1 mesa-vulkan-drivers; scripts/fetch-native.sh linux-x64-vulkan",
	"llama":  "scripts/fetch-native.sh linux-x64-vulkan (the prebuilt set carries libllama)",
	"rpc":    "apt-get install cmake ninja-build g++; scripts/build-native.sh linux-x64 cpu,rpc --into linux-x64-vulkan",
	"source": "apt-get install git; scripts/fetch-source.sh",
	"netns":  "run as root with iproute2 (apt-get install iproute2; sudo scripts/test.sh)",
	"root":   "run as root with util-linux (sudo scripts/test.sh)",
	"cuda":   "a machine with an NVIDIA GPU, its driver and the CUDA 13 runtime (scripts/gpu-pack.sh for a GPU runner)",
	"metal":  "a Mac with Apple silicon (scripts/build-native.sh darwin-arm64)",
}

// hardware are the components no script can bring.
var hardware = map[string]bool{"cuda": true, "metal": true}

var (
	componentRe = regexp.MustCompile(`^([a-z]+) missing: `)
	locationRe  = regexp.MustCompile(`^\s*[A-Za-z0-9_./-]+\.go:\d+: `)
)

// skipReason is what a skipped test said last before it skipped, without
// its file and line.
func skipReason(res *result) string {
	for i := len(res.output) - 1; i >= 0; i-- {
		l := strings.TrimRight(res.output[i], "\n")
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		t = locationRe.ReplaceAllString(t, "")
		t = strings.TrimPrefix(t, "skipped in the child process: ")
		t = locationRe.ReplaceAllString(t, "")
		return t
	}
	return "(no reason given)"
}

// report prints the summary and reports whether anything failed.
func report(w io.Writer, runs []*run) bool {
	var passed, failed, skipped int
	type reason struct {
		text, component string
		n               int
		tests           []string
	}
	reasons := map[string]*reason{}
	var failures []string
	// a test one run skips (the race detector's, for a comparison with
	// llama.cpp) and another runs and passes is counted once, as passed
	ranElsewhere := map[string]bool{}
	for _, r := range runs {
		for key, res := range r.results {
			if res.action == "pass" {
				ranElsewhere[key] = true
			}
		}
	}
	coveredSkips := 0
	for _, r := range runs {
		for _, key := range r.order {
			res := r.results[key]
			if res.children > 0 && res.action != "fail" {
				continue // counted through its subtests
			}
			name := res.pkg + "." + res.test
			switch res.action {
			case "pass":
				passed++
			case "fail":
				if res.children > 0 && anyChildFailed(r, res) {
					continue
				}
				failed++
				failures = append(failures, name)
			case "skip":
				if ranElsewhere[key] {
					coveredSkips++
					continue
				}
				skipped++
				text := skipReason(res)
				rs := reasons[text]
				if rs == nil {
					rs = &reason{text: text}
					if m := componentRe.FindStringSubmatch(text); m != nil {
						rs.component = m[1]
					} else if i := strings.Index(text, " is required (GGLOAD_REQUIRE)"); i > 0 {
						rs.component = text[:i]
					}
					reasons[text] = rs
				}
				rs.n++
				rs.tests = append(rs.tests, name)
			default:
				// started and never ended: the binary died under it
				failed++
				failures = append(failures, name+" (did not finish)")
			}
		}
	}
	if coveredSkips > 0 {
		fmt.Fprintf(w, "\n(%d tests one run skipped, another ran and passed: counted once, as passed)", coveredSkips)
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	for _, f := range failures {
		fmt.Fprintf(w, "  FAILED %s\n", f)
	}
	list := make([]*reason, 0, len(reasons))
	for _, r := range reasons {
		list = append(list, r)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		return list[i].text < list[j].text
	})
	unexpected := 0
	for _, r := range list {
		fmt.Fprintf(w, "  %d skipped: %s\n", r.n, r.text)
		if len(r.tests) <= 3 {
			fmt.Fprintf(w, "      %s\n", strings.Join(r.tests, ", "))
		} else {
			fmt.Fprintf(w, "      %s and %d more\n", strings.Join(r.tests[:3], ", "), len(r.tests)-3)
		}
		if fix, ok := fixes[r.component]; ok {
			fmt.Fprintf(w, "      to run them: %s\n", fix)
		} else {
			fmt.Fprintf(w, "      to run them: a system that has what the reason names\n")
		}
		if !hardware[r.component] {
			unexpected += r.n
		}
	}
	switch {
	case skipped == 0:
	case unexpected == 0:
		fmt.Fprintln(w, "every skip is for a GPU this machine lacks (CUDA, Metal): no script can bring one")
	default:
		fmt.Fprintf(w, "%d skips are not for missing GPU hardware: the commands above remove them\n", unexpected)
	}
	return failed > 0
}

func anyChildFailed(r *run, p *result) bool {
	prefix := p.pkg + " " + p.test + "/"
	for key, res := range r.results {
		if strings.HasPrefix(key, prefix) && res.action == "fail" {
			return true
		}
	}
	return false
}
