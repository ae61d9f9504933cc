package jinja

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/internal/ojson"
)

type benchCase struct {
	name  string
	tmpl  *Template
	ctx   *Context
	src   string
	vars  string
	pinNs float64
}

// benchCases are the templates of models/templates that render the
// 32-message conversation with tools (bench32), with the pin's time for
// one render of it, measured in its own process.
func benchCases(b *testing.B) []benchCase {
	b.Helper()
	var specs []tmplSpec
	for _, f := range templateFiles(b) {
		specs = append(specs, tmplSpec{filepath.Base(f), f, "<s>", "</s>"})
	}
	o := startOracle(b, "bench", zoneUTC)
	var out []benchCase
	for _, c := range chatCases(b, specs, ojson.NullValue()) {
		if c.name != "bench32" {
			continue
		}
		src := readFile(b, filepath.Join(templatesDir(b), c.tmpl))
		t, err := Parse(c.tmpl, src)
		if err != nil {
			continue
		}
		vars, err := ojson.ParseString(c.vars)
		if err != nil {
			b.Fatal(err)
		}
		ctx := &Context{Now: time.Unix(1753500000, 0).In(zoneUTC.loc)}
		if c.preserve != "" {
			ctx.PreserveReasoning(c.preserve == "1")
		}
		if c.effort != "" {
			ctx.ReasoningEffort(c.effort[1:])
		}
		if err := ctx.SetJSON(vars, true); err != nil {
			b.Fatal(err)
		}
		if _, err := t.Render(ctx); err != nil {
			continue // the template refuses the conversation (so does the pin)
		}
		a := o.call(1, src, c.vars, "300")
		if strings.HasPrefix(a[0], "ERR") {
			b.Fatalf("%s renders here but not in the pin: %s", c.tmpl, a[0])
		}
		ns, err := strconv.ParseFloat(a[0], 64)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, benchCase{c.tmpl, t, ctx, src, c.vars, ns})
	}
	if len(out) < 20 {
		b.Fatalf("only %d templates render the benchmark's conversation", len(out))
	}
	return out
}

// BenchmarkRender renders a 32-message conversation with tools with each
// template of models/templates; pin-ns/op is libllama-common's runtime on
// the same context (one render, in process), ratio ours over the pin's.
func BenchmarkRender(b *testing.B) {
	cases := benchCases(b)
	for _, c := range cases {
		b.Run(strings.TrimSuffix(c.name, ".jinja"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.tmpl.Render(c.ctx); err != nil {
					b.Fatal(err)
				}
			}
			ours := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(c.pinNs, "pin-ns/op")
			b.ReportMetric(ours/c.pinNs, "ratio")
		})
	}
}

// BenchmarkRenderAll renders the conversation once with every template
// per op: its ratio is the whole set's, ours over the pin's.
func BenchmarkRenderAll(b *testing.B) {
	cases := benchCases(b)
	var pin float64
	for _, c := range cases {
		pin += c.pinNs
	}
	b.ResetTimer()
	for b.Loop() {
		for _, c := range cases {
			if _, err := c.tmpl.Render(c.ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	ours := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(pin, "pin-ns/op")
	b.ReportMetric(ours/pin, "ratio")
	b.ReportMetric(float64(len(cases)), "templates")
}
