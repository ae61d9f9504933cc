package place

import "testing"

// The zero value of every mode is llama.cpp's default, and each spelling
// reads back to the value whose llama.cpp number the pin's enums give.
func TestParamsZeroValueAndSpellings(t *testing.T) {
	var p Params
	if p.SplitMode != SplitLayer || p.LoadMode != LoadAuto || p.Lazy != LazyAuto || !p.NGPULayers.IsAuto() || p.NoExtraBufts {
		t.Fatalf("zero Params: %+v", p)
	}
	for _, c := range []struct {
		s     string
		llama int
	}{{"none", 0}, {"layer", 1}, {"row", 2}, {"tensor", 3}} {
		m, err := ParseSplitMode(c.s)
		if err != nil || m.String() != c.s || m.Llama() != c.llama {
			t.Errorf("split %q: %v %v llama %d", c.s, m, err, m.Llama())
		}
	}
	for i, s := range LoadModeNames() {
		m, err := ParseLoadMode(s)
		if err != nil || m.String() != s || m.Llama() != i-1 {
			t.Errorf("load %q: %v %v llama %d", s, m, err, m.Llama())
		}
	}
	for _, c := range []struct {
		s     string
		llama int
	}{{"off", 0}, {"auto", 1}, {"on", 2}} {
		m, err := ParseLazyMode(c.s)
		if err != nil || m.String() != c.s || m.Llama() != c.llama {
			t.Errorf("lazy %q: %v %v llama %d", c.s, m, err, m.Llama())
		}
	}
	for _, c := range []struct {
		s, str string
		llama  int
		count  int
		isNum  bool
	}{
		{"auto", "auto", -1, 0, false}, {"-1", "auto", -1, 0, false},
		{"all", "all", -2, 0, false}, {"-2", "all", -2, 0, false}, {"-9", "all", -2, 0, false},
		{"0", "0", 0, 0, true}, {"7", "7", 7, 7, true},
	} {
		l, err := ParseLayers(c.s)
		n, ok := l.Count()
		if err != nil || l.String() != c.str || l.Llama() != c.llama || n != c.count || ok != c.isNum {
			t.Errorf("layers %q: %v (%v) llama %d count %d %v", c.s, l, err, l.Llama(), n, ok)
		}
	}
	if _, err := ParseLayers("many"); err == nil {
		t.Error("layers \"many\" accepted")
	}
	if NLayers(0) == AutoLayers() || NLayers(-1) != AutoLayers() || NLayers(-5) != AllLayers() {
		t.Error("NLayers: 0 must differ from auto, -1 is auto, below is all")
	}
	if got := NLayers(0).resolve(12); got != 0 {
		t.Errorf("NLayers(0) resolves to %d layers", got)
	}
	if got := AllLayers().resolve(12); got != 13 {
		t.Errorf("all layers of 12 + output resolve to %d", got)
	}
}
