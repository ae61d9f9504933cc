package jinja

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// quirks are templates on the pin's corners, each compared with the pin:
// what it does there is what a port is most likely to get wrong.
var quirks = []struct{ tmpl, vars string }{
	// functions compare by the pointer std::function stores
	{`{{ range == tojson }}|{{ range == range }}|{{ tojson == tojson }}|{{ 'a'.upper == 'b'.lower }}`, `{}`},
	{`{% macro m() %}{% endmacro %}{% macro n() %}{% endmacro %}{{ m == n }}|{{ m == range }}|{{ m == 1 }}`, `{}`},
	// keys: 1, 1.0 and true are one key; NaN is never found
	{`{{ {1: 'a', 1.0: 'b', true: 'c'} }}|{{ {0: 1, none: 2, 1.0: 3, '0': 4, true: 5} | tojson }}`, `{}`},
	{`{% set d = {} %}{{ d }}{{ (0.0 / 0.0) }}`, `{}`},
	// lstrip_blocks at the very start, and text before a block
	{`a{% if true %}b{% endif %}`, `{}`},
	{"  {% if true %}x{% endif %}\n  {{- 'y' }}", `{}`},
	{"{%- if true -%}\n  x  \n{%- endif -%}\n", `{}`},
	{"{# c #}\n{{ 1 }}{#- c -#}  2", `{}`},
	// break inside if drops the if's output
	{`{% for i in range(3) %}{{ i }}{% if i == 1 %}x{% break %}{% endif %}{% endfor %}`, `{}`},
	{`{% for i in range(3) %}{% continue %}{% else %}none{% endfor %}`, `{}`},
	{`{% macro m() %}{% break %}{% endmacro %}{% for i in range(3) %}{{ i }}{{ m() }}{% endfor %}`, `{}`},
	// floats as text and as JSON
	{`{{ 3.14159265 }}|{{ 3.14159265 | string }}|{{ 1e20 }}|{{ 0.1 + 0.2 }}|{{ 1 / 3 }}|{{ [1.0, 2.5e-7, 123456789.0] | tojson }}`, `{}`},
	{`{{ x }}|{{ x | tojson }}|{{ y | tojson }}|{{ z }}`, `{"x": 1e300, "y": -0.0, "z": 1.5e-10}`},
	// NaN's sign, as x86 and glibc make it
	{`{{ 2.5 % 0 }}|{{ 7 % 0 }}|{{ 0.0 / 0.0 }}|{{ 'nan' | float % 2 }}|{{ '-nan' | float }}|{{ 1e308 * 10 % 3 }}|{{ (1e308 * 10) - (1e308 * 10) }}`, `{}`},
	// integers past a double's precision
	{`{{ 9007199254740993 + 0 }}|{{ 9223372036854775807 * 2 }}|{{ 7 % 0 }}|{{ -9223372036854775807 - 2 }}`, `{}`},
	// strings: repetition, parts, slices
	{`{{ 'ab' * 3 }}|{{ 3 * 'ab' }}|{{ 'abc'[::-1] }}|{{ 'abc'[5] }}|{{ 'abcdef'[1:5:2] }}|{{ [1,2,3][-1] }}`, `{}`},
	{`{{ s.split() }}|{{ s.rsplit(' ', 1) }}|{{ s | indent(2, true) }}|{{ "\nabc\n\nd\n" | indent(3, blank=true) }}`, `{"s": "a b  c"}`},
	{`{{ "%s" | format }}`, `{}`},
	{`{{ "a{}b{}" .format(1, s) }}`, `{"s": "x"}`},
	// sort's ties and reverse, dictsort by value
	{`{{ xs | sort(attribute='k') | map(attribute='v') | join(',') }}|{{ xs | sort(attribute='k', reverse=true) | map(attribute='v') | join(',') }}`,
		`{"xs": [{"k":1,"v":"a"},{"k":0,"v":"b"},{"k":1,"v":"c"},{"k":0,"v":"d"},{"k":1,"v":"e"},{"k":0,"v":"f"},{"k":1,"v":"g"},{"k":0,"v":"h"},{"k":1,"v":"i"},{"k":0,"v":"j"},{"k":1,"v":"k"},{"k":0,"v":"l"},{"k":1,"v":"m"},{"k":0,"v":"n"},{"k":1,"v":"o"},{"k":0,"v":"p"},{"k":1,"v":"q"},{"k":0,"v":"r"},{"k":1,"v":"s"}]}`},
	{`{{ o | dictsort(by='value') }}|{{ o | dictsort(reverse=true) }}|{{ ['b', 10, 'a', 9, 2.5] | sort }}`, `{"o": {"b": 2, "a": 2, "c": 1, "d": 2}}`},
	// member access corners
	{`{{ o.items }}|{{ o['items'] }}|{{ o.keys() }}|{{ loop }}|{{ o.0 }}|{{ [1,2].1 }}`, `{"o": {"items": 1, "0": "zero"}}`},
	{`{% set ns = namespace(a=1) %}{% set ns.b = ns %}{{ ns.a }}`, `{}`},
	// the in operator tests membership first, whatever the operator
	{`{{ [1] - {} }}`, `{}`},
	{`{{ none in [none] }}|{{ 'a' in none }}`, `{}`},
	// undefined and none in concatenation
	{`{{ nothing ~ 'x' }}|{{ none_v + 'y' }}|{{ 'z' ~ nothing }}`, `{"none_v": null}`},
	// int(), float() on strings
	{`{{ '0x1f' | int(base=16) }}|{{ '0x1f' | int(base=0) }}|{{ '077' | int(base=0) }}|{{ ' 12abc' | int }}|{{ 'z' | int(default=7) }}|{{ '99999999999' | int }}`, `{}`},
	{`{{ '1e3' | float }}|{{ 'inf' | float }}|{{ '-nan' | float }}|{{ '0x1p3' | float }}|{{ '.5e' | float }}|{{ '1e999' | float(default=2.5) }}`, `{}`},
	// call blocks and caller
	{`{% macro m(a) %}[{{ caller(a) }}]{% endmacro %}{% call(x) m(3) %}<{{ x }}>{% endcall %}`, `{}`},
	// tojson's options
	{`{{ o | tojson(indent=2) }}|{{ o | tojson(separators=[';', '=']) }}|{{ 'é\u00ff😀' | tojson(ensure_ascii=true) }}`, `{"o": {"a": [1, {"b": null}], "c": "q\"\\\n"}}`},
	// the select expression in a for loop with loop.*
	{`{% for m in msgs if m.role != 'x' %}{{ loop.index }}/{{ loop.length }}{{ loop.previtem.role if loop.previtem }}{% endfor %}`, `{"msgs": [{"role": "a"}, {"role": "x"}, {"role": "b"}]}`},
	// error messages with typeid names and positions
	{`{{ 'a'.upper(1, 2) }}{{ range('x') }}`, `{}`},
	{"line1\n{{ x.y.z | upper }}\n{{ 1 + none }}", `{"x": {}}`},
	{`{% for a, b in [[1]] %}{% endfor %}`, `{}`},
	{`{{ raise_exception('boom') }}`, `{}`},
	// statements and syntax the pin reads its own way
	{`{% generation %}x{% endgeneration %}|{% generation foo %}`, `{}`},
	{`{% generation %}a{% endgeneration %}b`, `{}`},
	{`{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c, d = (3,) %}`, `{}`},
	{`{% set x %}  block {{ 1 }}  {% endset %}[{{ x }}]`, `{}`},
	{`{% macro m(a, b=2, c=3) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1, c=5) }}|{{ m(c=1, a=2) }}|{{ m(*[1, 2]) }}`, `{}`},
	{`{{ x is divisibleby 3 }}`, `{"x": 6}`},
	{`{{ 1 if false }}|{{ 2 if true }}|{% for i in range(5) if i is odd %}{{ i }}{% endfor %}`, `{}`},
	{`{{ {'a': {'b': {'c': 1}}} }}|{{ {'a': 1}['a'] }}}}`, `{}`},
	{`{{ 'a' -}}   {{- 'b' }}|{%- if true -%}  c  {%- endif -%}  |`, `{}`},
	{`{% raw %}x{% endraw %}`, `{}`},
	{`{{ ß }}`, `{}`},
	{`{% filter replace('a', 'b') %}aaa{% endfilter %}|{% filter upper %}{% filter lower %}MiX{% endfilter %}x{% endfilter %}`, `{}`},
	{`{% call m() %}x{% endcall %}`, `{}`},
	{`{{ namespace }}|{{ range(3) }}|{{ loop }}|{{ (1, 2) }}|{{ (1,) }}|{{ [] }}|{{ {} }}|{{ none }}|{{ x }}`, `{"x": [1, "a", null, true, 1.5, {"k": "v'"}]}`},
	{`{{ 'abc' | list }}|{{ 'a,b' | split(',') }}|{{ 'x' | items }}|{{ none | items }}|{{ nothing | items }}|{{ nothing | length }}`, `{}`},
	{"\r\n{% if true %}\r\n  a\r\n{% endif %}\r\n\r\n", `{}`},
	{"{{ 'unterminated }}", `{}`},
	{`{{ "esc\q" }}`, `{}`},
	{"{# unterminated comment", `{}`},
	// strftime's flags and widths
	{`{{ strftime_now('%_5d|%-d|%05e|%^a|%#b|%10A|%-10B|%^#Z|%Ey|%Od|%EY|%Oq|%5%|%') }}`, `{}`},
	{`{{ strftime_now('%a %A %b %B %c %C %d %D %e %F %g %G %h %H %I %j %k %l %m %M %n %p %P %r %R %s %S %t %T %u %U %V %w %W %x %X %y %Y %z %Z %%') }}`, `{}`},
	{`{{ strftime_now('') }}`, `{}`},
	{`{{ strftime_now('%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y%Y') }}`, `{}`},
}

func TestQuirksAgainstPin(t *testing.T) {
	for _, zone := range []oracleZone{zoneUTC, zoneIndia, zoneWest} {
		quirksIn(t, startOracle(t, "render", zone))
	}
}

func quirksIn(t *testing.T, o *oracle) {
	for _, q := range quirks {
		for _, now := range []int64{1700000000, 1720000000, 946684799, -86400 * 365 * 100} {
			req := renderReq{tmpl: q.tmpl, vars: q.vars, now: now, loc: o.loc, mark: true}
			want := o.render(req)
			got := ours(req)
			if got != want {
				t.Errorf("template %q vars %s:\n ours: %v %q %q\n  pin: %v %q %q", q.tmpl, q.vars, got.ok, got.out, got.parts, want.ok, want.out, want.parts)
				break
			}
		}
	}
}

// strftime_now over random formats (flags, widths, modifiers, every
// conversion) and random times, in three zones, as the pin's libc writes
// them.
func TestStrftimeAgainstPin(t *testing.T) {
	n := 300
	if all() {
		n = 20000
	}
	seed := uint64(7)
	if s := os.Getenv("GGLOAD_CHAT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	r := rand.New(rand.NewPCG(seed, 11))
	convs := "aAbBcCdDeFgGhHIjklmMnpPrRsStTuUVwWxXyYzZ%EOqQ"
	flags := "_-0^#"
	for _, zone := range []oracleZone{zoneUTC, zoneIndia, zoneWest} {
		o := startOracle(t, "render", zone)
		for i := 0; i < n/3; i++ {
			var f strings.Builder
			for range r.IntN(6) + 1 {
				if r.IntN(4) == 0 {
					f.WriteString([]string{"x", " ", "-", "é", ":", "%%"}[r.IntN(6)])
					continue
				}
				f.WriteByte('%')
				for range r.IntN(3) {
					if r.IntN(2) == 0 {
						f.WriteByte(flags[r.IntN(len(flags))])
					}
				}
				if r.IntN(3) == 0 {
					f.WriteString(strconv.Itoa(r.IntN(30)))
				}
				if r.IntN(6) == 0 {
					f.WriteByte("EO"[r.IntN(2)])
				}
				f.WriteByte(convs[r.IntN(len(convs))])
			}
			if r.IntN(20) == 0 {
				f.WriteByte('%')
			}
			vars := ov("f", f.String()).DumpSafe(-1)
			now := r.Int64N(1<<34) - 1<<33
			req := renderReq{tmpl: "{{ strftime_now(f) }}", vars: vars, now: now, loc: o.loc}
			want := o.render(req)
			if got := ours(req); got != want {
				t.Errorf("strftime %q at %d in %s:\n ours: %v %q\n  pin: %v %q", f.String(), now, zone.tz, got.ok, got.out, want.ok, want.out)
			}
		}
	}
}

// The capability probe on templates that trip it up, as the pin's.
func TestCapsQuirksAgainstPin(t *testing.T) {
	o := startOracle(t, "caps", zoneUTC)
	for _, src := range []string{
		`{% set _ = messages.pop() %}{{ messages }}`,
		`{% set _ = tools.pop() if tools %}{% for m in messages %}{{ m.content }}{% endfor %}`,
		`{{ messages[0].content | tojson }}{{ reasoning_strength }}`,
		`{% for m in messages %}{{ m.content if m.content is string else m.content[0].text }}{% for c in m.tool_calls %}{{ c.function.arguments.arg }}{% endfor %}{% endfor %}`,
		`{% for m in messages %}{% if m.reasoning_content and preserve_thinking %}{{ m.reasoning_content }}{% endif %}{% endfor %}{{ raise_exception('x') if tools }}`,
		`{{ 1 +`,
		``,
	} {
		want := o.call(2, src)
		tmpl, err := Parse("caps", src)
		var got [2]string
		switch {
		case err != nil:
			got = [2]string{"ERR", err.(*Error).Msg}
		default:
			c, err := tmpl.Caps()
			if err != nil {
				got = [2]string{"ERR", err.(*Error).Msg}
			} else {
				got = [2]string{"OK", capsJSON(c)}
			}
		}
		if got[0] != want[0] || got[1] != want[1] {
			t.Errorf("caps of %q:\n ours: %s %s\n  pin: %s %s", src, got[0], got[1], want[0], want[1])
		}
	}
}
