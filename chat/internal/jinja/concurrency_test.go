package jinja

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/internal/ojson"
)

// One template and one context render alike from many goroutines at once
// (run it under -race): the context's shared values stay unchanged by
// templates that change theirs.
func TestConcurrentRenders(t *testing.T) {
	src := `{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% set _ = m.update if m.update %}` +
		`{{ m.content | upper }}{% set x = messages.append({'role': 'x', 'content': 'y'}) if loop.first %}{% endfor %}` +
		`{{ messages | length }}{{ tools | tojson }}{{ strftime_now('%Y') }}{{ big.k15 }}{% set _ = big.update({}) if big.update %}`
	tmpl, err := Parse("concurrent", src)
	if err != nil {
		t.Fatal(err)
	}
	vars, err := ojson.ParseString(`{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
		"tools": [{"name": "t", "parameters": {"type": "object"}}],
		"big": {"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15}}`)
	if err != nil {
		t.Fatal(err)
	}
	c := &Context{Now: time.Unix(1700000000, 0).UTC()}
	if err := c.SetJSON(vars, true); err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for i, f := range templateFiles(t) {
		if i%7 == 0 {
			files = append(files, f)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				got, err := tmpl.Render(c)
				if err != nil || got != want {
					errs <- got
					return
				}
				if g%2 == 0 {
					tt, err := Parse(filepath.Base(files[i%len(files)]), readFile(t, files[i%len(files)]))
					if err == nil {
						tt.Caps()
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a concurrent render gave %q, not %q", e, want)
	}
	if want != "AB3"+`[{"name": "t", "parameters": {"type": "object"}}]`+"202315" {
		t.Errorf("render %q", want)
	}
}
