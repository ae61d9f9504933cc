package chat

import (
	"errors"
	"strings"
	"testing"
)

// A template that fails to parse or to render gives the pin's message
// (what() of common_chat_templates_apply's exception, or the one
// common_chat_templates_init logs: it rethrows a copy sliced to
// std::exception), and here the template's name and the line and column
// too.
func TestTemplateErrors(t *testing.T) {
	o := startOracle(t)
	var us ours
	for _, c := range []struct {
		src  string
		line int // 0: no place expected
	}{
		{"{% for m in messages %}", 1},
		{"hello\n{{ messages[0].content }\n", 2},
		{"{% if x %}\n{% else %}\n{% else %}{% endif %}", 3},
		{"a\nb\n{{ 'unterminated }}", 3},
		{"{% set %}", 1},
		{"{{ raise_exception('no system role') }}", 1},
		{"line 1\n{{ messages | map(attribute='x') | join(1, 2, 3) }}", 2},
		{"{% for m in messages %}\n{{ m.content.nope() }}\n{% endfor %}", 2},
		{"{{ messages[0]['content'] * -1 }}{{ undefined_fn() }}", 1},
		{"{% include 'x' %}", 1},
	} {
		in := benchConversation()
		in.Messages = in.Messages[:2]
		in.Tools = nil
		q := &request{src: c.src, bos: "<s>", eos: "</s>", in: in}
		want, got := o.apply(q), us.apply(q)
		if want.err == "" {
			t.Errorf("%q: the pin renders it", c.src)
			continue
		}
		if want.err == "std::exception" {
			o.send("init", c.src)
			o.flush()
			if o.read() == "err" {
				want.err = o.read()
			}
		}
		if got.err != want.err {
			t.Errorf("%q: error\n%q\nthe pin's\n%q", c.src, got.err, want.err)
		}
		tm, err := FromSource(Options{Template: c.src, Name: "my.jinja"})
		if err == nil {
			_, err = tm.Apply(&in)
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: %T %v, want an *Error", c.src, err, err)
			continue
		}
		if c.line > 0 && (e.Template != "my.jinja" || e.Line != c.line || !strings.HasPrefix(err.Error(), "my.jinja:")) {
			t.Errorf("%q: %q names %q line %d, want my.jinja line %d", c.src, err.Error(), e.Template, e.Line, c.line)
		}
	}
	// endless recursion: the pin overflows its stack; here, an error
	tm, err := FromSource(Options{Template: "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}", Name: "deep"})
	if err == nil {
		_, err = tm.Apply(&Inputs{Messages: []Message{{Role: "user", Content: "x"}}})
	}
	if err == nil {
		t.Error("endless recursion: no error")
	} else {
		t.Logf("endless recursion: %v", err)
	}
}
