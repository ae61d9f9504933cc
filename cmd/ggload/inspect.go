package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/place"
)

func init() {
	register(command{"inspect", "FILE [SPLIT...]", "what a GGUF file holds: header, metadata, tensors, splits, totals, how it is placed", runInspect})
	optionSets["inspect"] = func() *optionSet { return inspectOptions(new(bool), new(bool), new(hubFlags)) }
}

type inspectFile struct {
	Path       string `json:"path"`
	Version    uint32 `json:"version"`
	Size       int64  `json:"size"`
	Alignment  uint64 `json:"alignment"`
	DataOffset int64  `json:"data_offset"`
	KVCount    int    `json:"kv_count"`
	Tensors    int    `json:"tensor_count"`
}

type inspectKV struct {
	Key    string `json:"key"`
	Type   string `json:"type"`
	Value  any    `json:"value,omitempty"`
	Length uint64 `json:"length,omitempty"`
}

type inspectTensor struct {
	Name   string  `json:"name"`
	Type   string  `json:"type"`
	Shape  []int64 `json:"shape"`
	File   int     `json:"file"`
	Offset int64   `json:"offset"`
	Size   int64   `json:"size"`
}

type inspectReport struct {
	Architecture string `json:"architecture,omitempty"`
	// Exact: ggload replays llama.cpp's own tensor creation for the
	// architecture; Placement says it in a word ("exact", "generic").
	Exact     bool            `json:"exact"`
	Placement string          `json:"placement"`
	PlacedBy  string          `json:"placed_by"`
	Files     []inspectFile   `json:"files"`
	KV        []inspectKV     `json:"kv"`
	Tensors   []inspectTensor `json:"tensors"`
	Elements  uint64          `json:"elements"`
	Bytes     uint64          `json:"bytes"`
	BPW       float64         `json:"bpw"`
	FileType  string          `json:"file_type"`
}

func inspectOptions(asJSON, full *bool, hub *hubFlags) *optionSet {
	s := newOptionSet("inspect", "What a GGUF file holds (a split model: its first file, or every file): header, metadata, tensors, totals, and whether ggload places its architecture exactly or by the generic path.",
		"ggload inspect FILE [SPLIT...] [options]", "ggload inspect -hf <user>/<model>[:quant] [options]")
	s.add(&option{names: []string{"--json"}, help: "print JSON", on: func(on bool) error { *asJSON = on; return nil }})
	s.add(&option{names: []string{"--full"}, help: "print arrays in full", on: func(on bool) error { *full = on; return nil }})
	hub.add(s)
	hub.addToken(s)
	return s
}

func runInspect(ctx context.Context, args []string, stdout io.Writer) error {
	var asJSON, full bool
	var hub hubFlags
	s := inspectOptions(&asJSON, &full, &hub)
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	if hub.repo != "" {
		if len(pos) > 0 {
			return s.errorf("-hf %s and %s: give one model", hub.repo, pos[0])
		}
		path, err := hub.local(ctx, s, "")
		if err != nil {
			return err
		}
		pos = []string{path}
	}
	if len(pos) < 1 {
		return s.errorf("no FILE given: usage: %s", s.usage[0])
	}
	var m *gguf.Model
	if len(pos) == 1 {
		if httpsrc.IsURL(pos[0]) {
			if _, err := httpsrc.CheckURL(pos[0]); err != nil {
				return s.errorf("%v", err)
			}
		}
		m, err = openModel(ctx, pos[0], httpsrc.Options{})
	} else {
		m, err = gguf.OpenSplits(pos...)
	}
	if err != nil {
		return err
	}
	defer m.Close()
	rep, err := describeModel(m, full)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printInspect(stdout, rep, m, full)
	return nil
}

// jsonValue converts a value for JSON: scalars as themselves, arrays (when
// full) as lists.
func jsonValue(v gguf.Value, full bool) (any, error) {
	if !v.IsArray() {
		if s, ok := v.Str(); ok {
			return s, nil
		}
		if b, ok := v.Bool(); ok {
			return b, nil
		}
		if f, ok := v.Float(); ok {
			return f, nil
		}
		if i, ok := v.Int(); ok {
			return i, nil
		}
		u, _ := v.Uint()
		return u, nil
	}
	if !full {
		return nil, nil
	}
	switch v.ElemType() {
	case gguf.TypeString:
		return v.Strings()
	case gguf.TypeFloat32, gguf.TypeFloat64:
		return v.Floats()
	case gguf.TypeBool:
		return v.Bools()
	}
	if v.ElemType() == gguf.TypeUint64 {
		raw, err := v.ArrayBytes()
		if err != nil {
			return nil, err
		}
		out := make([]uint64, len(raw)/8)
		for i := range out {
			for k := 7; k >= 0; k-- {
				out[i] = out[i]<<8 | uint64(raw[8*i+k])
			}
		}
		return out, nil
	}
	return v.Ints()
}

func describeModel(m *gguf.Model, full bool) (inspectReport, error) {
	a := m.Architecture()
	exact := place.KnownArchitecture(a)
	rep := inspectReport{Architecture: a, Exact: exact, Placement: place.Placement(exact), PlacedBy: place.DescribePlacement(gguf.Printable(a, 64), exact),
		Elements: m.NElements, Bytes: m.NBytes, BPW: m.BPW(), FileType: m.FileTypeName()}
	if a == "" || a == "clip" {
		rep.Placement = "none"
	}
	for i, f := range m.Files {
		rep.Files = append(rep.Files, inspectFile{m.Paths[i], f.Version, f.Size, f.Alignment, f.DataOffset, len(f.KV), len(f.Tensors)})
	}
	for _, kv := range m.Files[0].KV {
		val, err := jsonValue(kv.Value, full)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", kv.Key, err)
		}
		e := inspectKV{Key: kv.Key, Type: kv.Value.TypeName(), Value: val}
		if kv.Value.IsArray() {
			e.Length = kv.Value.Len()
		}
		rep.KV = append(rep.KV, e)
	}
	for _, w := range m.Weights {
		n := max(w.NDims, 1)
		rep.Tensors = append(rep.Tensors, inspectTensor{w.Name, w.Type.String(), append([]int64(nil), w.Shape[:n]...), w.File, w.Offset, w.Size})
	}
	return rep, nil
}

func printInspect(w io.Writer, rep inspectReport, m *gguf.Model, full bool) {
	for i, f := range rep.Files {
		split := ""
		if len(rep.Files) > 1 {
			split = fmt.Sprintf(" (split %d of %d)", i+1, len(rep.Files))
		}
		fmt.Fprintf(w, "%s%s: GGUF v%d, %s, alignment %d, data at %#x, %d pairs, %d tensors\n",
			f.Path, split, f.Version, mibOrGib(uint64(f.Size)), f.Alignment, f.DataOffset, f.KVCount, f.Tensors)
	}
	if rep.Architecture != "" {
		fmt.Fprintf(w, "architecture %s\n", gguf.Printable(rep.Architecture, 64))
	}
	fmt.Fprintf(w, "placement    %s\n", rep.PlacedBy)
	fmt.Fprintf(w, "file type    %s\n", rep.FileType)
	fmt.Fprintf(w, "file size    %s\n", m.SizeString())
	fmt.Fprintf(w, "elements     %d\n", rep.Elements)

	fmt.Fprintf(w, "\nmetadata (%d pairs):\n", len(rep.KV))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, kv := range m.Files[0].KV {
		max := 0
		if full {
			max = -1
		}
		val := kv.Value.Format(max)
		if !kv.Value.IsArray() && len(val) > 120 && !full {
			val = val[:117] + "..."
		}
		if kv.Value.IsArray() && !full {
			val = "" // type and length say it; --full prints the elements
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", gguf.Printable(kv.Key, 256), kv.Value.TypeName(), strings.ReplaceAll(val, "\n", `\n`))
	}
	tw.Flush()

	fmt.Fprintf(w, "\ntensors (%d):\n", len(rep.Tensors))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  name\ttype\tshape\tsplit\toffset\tsize\n")
	for _, t := range rep.Tensors {
		dims := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			dims[i] = fmt.Sprint(d)
		}
		fmt.Fprintf(tw, "  %s\t%s\t[%s]\t%d\t%#x\t%s\n", t.Name, t.Type, strings.Join(dims, ", "), t.File, t.Offset, mibOrGib(uint64(t.Size)))
	}
	tw.Flush()
}

func mibOrGib(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d B", n)
	}
}
