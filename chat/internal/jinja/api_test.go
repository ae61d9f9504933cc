package jinja

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/internal/ojson"
)

func mustJSON(t *testing.T, s string) ojson.Value {
	t.Helper()
	v, err := ojson.ParseString(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// test_stats of the pin's test-jinja.cpp: the values a template touched
// are marked, and only those.
func TestStats(t *testing.T) {
	tmpl, err := Parse("stats", "{{val.num}} {{val.str}} {{val.arr[0]}} {{val.obj.key1}} {{val.nested | tojson}}")
	if err != nil {
		t.Fatal(err)
	}
	r := &renderer{stats: true}
	root := newRootScope()
	root.set("val", fromJSON(mustJSON(t, `{"num": 1, "str": "abc", "arr": [1, 2, 3], "obj": {"key1": 1, "key2": 2, "key3": 3},
		"nested": {"inner_key1": [1, 2], "inner_key2": {"a": "x", "b": "y"}}, "mixed": {"used": 1, "unused": 2}}`), true))
	if _, err := tmpl.run(r, root); err != nil {
		t.Fatal(err)
	}
	val := root.getVal("val")
	checks := []struct {
		path []any
		used bool
	}{
		{[]any{"num"}, true}, {[]any{"str"}, true}, {[]any{"arr"}, true}, {[]any{"arr", 0}, true}, {[]any{"arr", 1}, false},
		{[]any{"obj"}, true}, {[]any{"obj", "key1"}, true}, {[]any{"obj", "key2"}, false},
		{[]any{"nested", "inner_key1", 0}, true}, {[]any{"nested", "inner_key2", "a"}, true}, {[]any{"mixed", "unused"}, false},
	}
	for _, c := range checks {
		if got := used(r.path(val, c.path...)); got != c.used {
			t.Errorf("val%v used: %v, want %v", c.path, got, c.used)
		}
	}
}

// test_string_parts of the pin's test-jinja.cpp: neighbours of one kind
// are joined, input apart from the template's text.
func TestStringParts(t *testing.T) {
	tmpl, err := Parse("parts", "{{ val.a }}{{ val.b }}-{{ val.c }}")
	if err != nil {
		t.Fatal(err)
	}
	c := &Context{}
	if err := c.SetJSON(mustJSON(t, `{"val": {"a": "A", "b": "B", "c": "C"}}`), true); err != nil {
		t.Fatal(err)
	}
	parts, err := tmpl.RenderParts(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []Part{{"AB", true}, {"-", false}, {"C", true}}
	if len(parts) != 3 || parts[0] != want[0] || parts[1] != want[1] || parts[2] != want[2] {
		t.Fatalf("parts %+v, want %+v", parts, want)
	}
	// negative control: unmarked, it is one template part
	c = &Context{}
	c.SetJSON(mustJSON(t, `{"val": {"a": "A", "b": "B", "c": "C"}}`), false)
	if parts, _ := tmpl.RenderParts(c); len(parts) != 1 || parts[0] != (Part{"AB-C", false}) {
		t.Fatalf("unmarked parts %+v", parts)
	}
}

// Errors name the template and the line, and carry llama.cpp's message.
func TestErrorsNameTheSource(t *testing.T) {
	_, err := Parse("tokenizer.chat_template", "line one\n{{ x")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("parse error %v", err)
	}
	if e.Name != "tokenizer.chat_template" || !strings.HasPrefix(e.Msg, "parser: Parser Error: ") || e.Line != 2 {
		t.Fatalf("parse error %+v", e)
	}
	if !strings.HasPrefix(err.Error(), "tokenizer.chat_template:2:") {
		t.Fatalf("Error() = %q", err.Error())
	}
	_, err = Parse("t.jinja", "{{ 'a' ! 'b' }}")
	if !errors.As(err, &e) || e.Msg != "lexer: unexpected character: !\n...{{ 'a' ! 'b' }}...\n          ^" {
		t.Fatalf("lex error %#v", err)
	}
	tmpl, err := Parse("t.jinja", "a\nb\n  {{ 1 + none }}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(nil)
	if !errors.As(err, &e) || e.Line != 3 || e.Col != 8 || !strings.Contains(e.Msg, "While executing BinaryExpression at line 3, column 8 in source:") ||
		!strings.HasSuffix(e.Msg, "Error: Cannot perform operation on null values") {
		t.Fatalf("render error %#v", err)
	}
}

// strftime_now's time: the context's, else SOURCE_DATE_EPOCH's, else the
// clock's.
func TestTime(t *testing.T) {
	tmpl, err := Parse("time", "{{ strftime_now('%s') }}")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1234567890")
	if out, err := tmpl.Render(nil); err != nil || out != "1234567890" {
		t.Fatalf("with SOURCE_DATE_EPOCH: %q %v", out, err)
	}
	if out, _ := tmpl.Render(&Context{Now: time.Unix(42, 0)}); out != "42" {
		t.Fatalf("with Now: %q", out)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "not a number")
	out, _ := tmpl.Render(nil)
	if d := time.Now().Unix() - atoi(out); d < -5 || d > 5 {
		t.Fatalf("with the clock: %q", out)
	}
}

// Strftime is the engine's strftime without the 100-byte buffer, and Now
// the engine's time.
func TestStrftimeAndNow(t *testing.T) {
	at := time.Date(2025, 7, 26, 13, 4, 5, 0, time.FixedZone("XYZ", -7*3600))
	if got := Strftime("%b %d %Y|%d %b %Y|%Z %z", at); got != "Jul 26 2025|26 Jul 2025|XYZ -0700" {
		t.Fatalf("Strftime: %q", got)
	}
	if got := Strftime(strings.Repeat("%Y", 40), at); len(got) != 160 {
		t.Fatalf("a long Strftime: %q", got)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "99")
	if Now().Unix() != 99 {
		t.Fatal("Now ignores SOURCE_DATE_EPOCH")
	}
}

func atoi(s string) int64 {
	var n int64
	for _, c := range s {
		n = n*10 + int64(c-'0')
	}
	return n
}

// The context's calls set globals in order: later ones win, as the pin's
// chat code relies on (caps_apply_* first, then the JSON).
func TestContextOrder(t *testing.T) {
	tmpl, err := Parse("order", "{{ reasoning_effort }}/{{ reasoning_strength }}/{{ drop_thinking }}/{{ x }}")
	if err != nil {
		t.Fatal(err)
	}
	c := &Context{}
	c.PreserveReasoning(true)
	c.ReasoningEffort("low")
	if err := c.SetJSON(mustJSON(t, `{"reasoning_effort": "high", "x": [1]}`), true); err != nil {
		t.Fatal(err)
	}
	c.Set("x", ojson.IntValue(2))
	if out, err := tmpl.Render(c); err != nil || out != "high/low/False/2" {
		t.Fatalf("%q %v", out, err)
	}
	if err := c.SetJSON(ojson.ArrayValue(), false); err == nil {
		t.Fatal("SetJSON took an array")
	}
}
