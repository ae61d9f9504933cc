// The package's API: a parsed template, a render's context and its errors
// (what common/jinja/runtime.h's context and runtime are to the pin's
// common/chat.cpp).

package jinja

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/ggload/ggload/internal/ojson"
)

// Template is a parsed template: parse it once, render it many times,
// from any number of goroutines.
type Template struct {
	name   string
	source string // normalized, as the pin's lexer_result::source
	prog   *program

	capsOnce sync.Once
	caps     Caps
	capsErr  error
}

// Error is a template that failed to parse or to render. Msg is
// llama.cpp's message for it, byte for byte (for a render error it shows
// the source around the statement that failed); Name is the name the
// template was parsed under; Line and Col place the failure in the
// source, where known (0 otherwise).
type Error struct {
	Name      string
	Msg       string
	Line, Col int
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.Name, e.Line, e.Col, e.Msg)
	}
	return e.Name + ": " + e.Msg
}

func (t *Template) errorAt(msg string, pos int) *Error {
	e := &Error{Name: t.name, Msg: msg}
	if pos >= 0 {
		e.Line, e.Col = lineCol(t.source, pos)
	}
	return e
}

// Parse reads a template as llama.cpp's lexer and parser read it: CRLF
// made LF, one trailing newline dropped, trim_blocks and lstrip_blocks
// on. name names the template in errors (a file, or the model's
// tokenizer.chat_template).
func Parse(name, source string) (t *Template, err error) {
	t = &Template{name: name, source: normalize(source)}
	defer func() {
		x := recover()
		if x == nil {
			return
		}
		t = nil
		switch e := x.(type) {
		case *lexError:
			err = &Error{Name: name, Msg: fmtErrorWithSource("lexer", e.msg, source, e.pos)}
			err.(*Error).Line, err.(*Error).Col = lineCol(normalize(source), e.pos)
		case *parseError:
			msg := e.msg
			if e.tagged {
				msg = fmtErrorWithSource("parser", e.msg, normalize(source), e.pos)
			}
			ee := &Error{Name: name, Msg: msg}
			ee.Line, ee.Col = lineCol(normalize(source), e.at)
			err = ee
		default:
			err = &Error{Name: name, Msg: fmt.Sprint("internal error: ", x)}
		}
	}()
	t.prog = parseTokens(tokenize(t.source), len(t.source))
	return t, nil
}

// Name is the name the template was parsed under.
func (t *Template) Name() string { return t.name }

// Source is the template's source as the pin keeps it
// (common_chat_template::source()): line ends normalized, one trailing
// newline dropped.
func (t *Template) Source() string { return t.source }

// Context is what a render sees: the globals, set in the order the calls
// below make them (a later one replaces an earlier one of the same name),
// and the time. The zero Context is empty, with the current time.
type Context struct {
	// Now is the time strftime_now formats, in its location. The zero
	// Time means the time at Render: SOURCE_DATE_EPOCH's (seconds) when
	// that variable holds an integer, else the clock's, in the local zone.
	Now time.Time

	sets []binding
}

// binding is one global, converted once: its strings, numbers and other
// leaves are shared by every render (they never change, and are never
// marked), its arrays and objects copied for each.
type binding struct {
	name string
	val  value
}

// SetJSON sets every member of obj as a global, in order, as the pin's
// global_from_json does; markInput marks its strings as input. obj must
// be an object.
func (c *Context) SetJSON(obj ojson.Value, markInput bool) error {
	if !obj.IsObject() {
		return &Error{Msg: "global_from_json: input JSON value must be an object"}
	}
	if tooDeep(obj, 0) {
		return &Error{Msg: fmt.Sprintf("global_from_json: input JSON nested deeper than %d levels", ojson.MaxDepth)}
	}
	for _, m := range obj.Members() {
		c.sets = append(c.sets, binding{m.Key, freeze(m.Value, markInput)})
	}
	return nil
}

// Set sets one global (a value nested deeper than ojson.MaxDepth is
// set as null).
func (c *Context) Set(name string, v ojson.Value) {
	if tooDeep(v, 0) {
		v = ojson.NullValue()
	}
	c.sets = append(c.sets, binding{name, freeze(v, false)})
}

// tooDeep says whether v nests deeper than ojson parses: the conversion
// recurses, as the pin's does.
func tooDeep(v ojson.Value, depth int) bool {
	if depth > ojson.MaxDepth {
		return true
	}
	for _, e := range v.Elems() {
		if tooDeep(e, depth+1) {
			return true
		}
	}
	for _, m := range v.Members() {
		if tooDeep(m.Value, depth+1) {
			return true
		}
	}
	return false
}

// PreserveReasoning sets what caps_apply_preserve_reasoning sets:
// preserve_thinking, and clear_thinking, truncate_history_thinking and
// drop_thinking to the opposite.
func (c *Context) PreserveReasoning(enabled bool) {
	c.Set("preserve_thinking", ojson.BoolValue(enabled))
	c.Set("clear_thinking", ojson.BoolValue(!enabled))
	c.Set("truncate_history_thinking", ojson.BoolValue(!enabled))
	c.Set("drop_thinking", ojson.BoolValue(!enabled))
}

// ReasoningEffort sets what caps_apply_reasoning_effort sets:
// reasoning_effort and reasoning_strength.
func (c *Context) ReasoningEffort(effort string) {
	c.Set("reasoning_effort", ojson.StringValue(effort))
	c.Set("reasoning_strength", ojson.StringValue(effort))
}

func (c *Context) now() time.Time {
	if c != nil && !c.Now.IsZero() {
		return c.Now
	}
	return defaultNow()
}

// Now is the time a render uses when its Context has none:
// SOURCE_DATE_EPOCH's (seconds) when that variable holds an integer, else
// the clock's, in the local zone. The chat code's own dates should come
// from it too.
func Now() time.Time { return defaultNow() }

func defaultNow() time.Time {
	if s, ok := os.LookupEnv("SOURCE_DATE_EPOCH"); ok {
		if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(sec, 0)
		}
	}
	return time.Now()
}

func (c *Context) scope() *scope {
	root := newRootScope()
	if c != nil {
		for _, b := range c.sets {
			root.set(b.name, thaw(b.val))
		}
	}
	return root
}

// Render renders the template in the context (nil is the zero Context)
// as llama.cpp's runtime does, and returns its output.
func (t *Template) Render(c *Context) (string, error) {
	parts, err := t.RenderParts(c)
	if err != nil {
		return "", err
	}
	if len(parts) == 1 {
		return parts[0].Text, nil
	}
	return jstr{parts: parts}.str(), nil
}

// RenderParts is Render's output as its parts: neighbours of the same
// kind joined, text from the input (strings the context marked) apart
// from the template's own.
func (t *Template) RenderParts(c *Context) ([]Part, error) {
	r := &renderer{src: t.source, now: c.now()}
	return t.run(r, c.scope())
}

// run executes the program in the scope and gathers its output.
func (t *Template) run(r *renderer, root *scope) (parts []Part, err error) {
	defer func() {
		if x := recover(); x != nil {
			parts, err = nil, t.renderError(x)
		}
	}()
	vals := make([]value, 0, len(t.prog.body))
	for _, s := range t.prog.body {
		vals = append(vals, r.exec(s, root))
	}
	return mergeParts(r.gatherAll(vals).parts), nil
}

func (t *Template) renderError(x any) *Error {
	e, ok := x.(*exception)
	if !ok {
		return &Error{Name: t.name, Msg: fmt.Sprint("internal error: ", x)}
	}
	return t.errorAt(e.msg, e.pos)
}
