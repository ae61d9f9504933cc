package jinja

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/internal/ojson"
)

func render(t *testing.T, src, vars string) (string, error) {
	t.Helper()
	tmpl, err := Parse("limits", src)
	if err != nil {
		return "", err
	}
	c := &Context{Now: time.Unix(0, 0).UTC()}
	if vars != "" {
		v, err := ojson.ParseString(vars)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetJSON(v, false); err != nil {
			t.Fatal(err)
		}
	}
	return tmpl.Render(c)
}

// What the pin dies of (its stack, its memory, forever) is an error here,
// named by its limit, and nothing panics.
func TestLimits(t *testing.T) {
	deep := strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000)
	nested := strings.Repeat("[", 3000) + strings.Repeat("]", 3000)
	cases := []struct{ name, src, vars, want string }{
		{"recursion", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, "", "macro calls nested deeper than 500 levels"},
		{"caller recursion", `{% macro f() %}{{ caller() }}{% endmacro %}{% macro g() %}{% call f() %}{{ g() }}{% endcall %}{% endmacro %}{{ g() }}`, "", "nested deeper than 500 levels"},
		{"a cycle printed", `{% set a = [] %}{% set _ = a.append(a) %}{{ a }}`, "", "value nested deeper than 500 levels (a cycle?)"},
		{"a cycle as JSON", `{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}`, "", "value nested deeper than 500 levels (a cycle?)"},
		{"deep input", `{{ x | tojson }}`, `{"x": ` + nested + `}`, "value nested deeper than 500 levels"},
		{"deep source", "{{ " + deep + " }}", "", "template nested deeper than 1000 levels"},
		{"repetition", `{{ 'x' * 1000000000 }}`, "", "string longer than 67108864 bytes"},
		{"doubling", `{% set s = 'xy' %}{% for i in range(40) %}{% set s = s ~ s %}{% endfor %}{{ s | length }}`, "", "string longer than 67108864 bytes"},
		{"doubling nothing", `{% set s = '' %}{% for i in range(40) %}{% set s = s ~ s %}{% endfor %}{{ s | length }}`, "", "string longer than 67108864 bytes"},
		{"indent", `{{ 'a\nb' | indent(2000000000) }}`, "", "string longer than 67108864 bytes"},
		{"negative indent", `{{ 'a\nb' | indent(-1) }}`, "", "basic_string::_M_replace_aux"},
		{"tojson indent", `{{ [[1]] | tojson(indent=2000000000) }}`, "", "string longer than 67108864 bytes"},
		{"output", `{% set s = 'x' * 60000000 %}{% for i in range(100) %}{{ s }}{% endfor %}`, "", "string longer than 67108864 bytes"},
		{"range", `{{ range(100000000) | length }}`, "", "range() of more than 1048576 elements"},
		{"range at the edge", `{{ range(9223372036854775800, 9223372036854775807, 3) | list }}`, "", ""},
		{"divisibleby zero", `{{ 4 is divisibleby(0) }}`, "", "integer division by zero"},
		{"inconsistent sort", `{{ [1, 'a', 2.5, 'b', 0.5, '10', 9, 'c', 3, '2', 1.5, 'd', 7, 'e', 8, 'f', 4, 'g', 5] | sort | length }}`, "", ""},
	}
	for _, c := range cases {
		if f := os.Getenv("GGLOAD_CHAT_CASE"); f != "" && f != c.name {
			continue
		}
		start := time.Now()
		out, err := render(t, c.src, c.vars)
		if d := time.Since(start); d > time.Second {
			t.Logf("%s took %v", c.name, d)
		}
		if c.want == "" {
			if err != nil && strings.Contains(err.Error(), "internal error") {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Msg, c.want) {
			t.Errorf("%s: got %q, %v; want an error with %q", c.name, out, err, c.want)
		}
	}
}

// A render that runs too long stops (at the step limit, lowered here).
func TestStepLimit(t *testing.T) {
	defer func(n int) { maxSteps = n }(maxSteps)
	maxSteps = 100000
	_, err := render(t, `{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}`, "")
	if err == nil || !strings.Contains(err.Error(), "template ran more than 100000 steps") {
		t.Fatalf("got %v", err)
	}
	if _, err := render(t, `{% for i in range(100) %}{{ i }}{% endfor %}`, ""); err != nil {
		t.Fatalf("a small loop: %v", err)
	}
}

// A context deeper than ojson parses is refused, not converted.
func TestDeepContext(t *testing.T) {
	v := ojson.ArrayValue()
	for range ojson.MaxDepth + 5 {
		v = ojson.ArrayValue(v)
	}
	c := &Context{}
	if err := c.SetJSON(ojson.ObjectValue(ojson.Member{Key: "x", Value: v}), false); err == nil ||
		!strings.Contains(err.Error(), "nested deeper than 10000 levels") {
		t.Fatalf("got %v", err)
	}
	c.Set("x", v)
	tmpl, err := Parse("deep", "{{ x is none }}")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tmpl.Render(c); err != nil || out != "True" {
		t.Fatalf("%q %v", out, err)
	}
}
