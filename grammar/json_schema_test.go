package grammar

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// trimGrammar is the pin's test trim(): the text stripped, and each
// line's indentation dropped.
func trimGrammar(s string) string {
	s = strings.Trim(s, " \n\r\t")
	return regexp.MustCompile(`(^|\n)[ \t]+`).ReplaceAllString(s, "$1")
}

// schemaCase is a case of the pin's test-json-schema-to-grammar.cpp.
type schemaCase struct {
	ok      bool
	name    string
	schema  string
	grammar string
}

// pinSchemaCases are the test({...}) cases of the pin's
// tests/test-json-schema-to-grammar.cpp, read from its source.
func pinSchemaCases(t *testing.T) []schemaCase {
	var cases []schemaCase
	for _, call := range cppCalls(t, pinTest(t, "test-json-schema-to-grammar.cpp"), "test") {
		if len(call) != 2 || call[1].kind != 'l' || len(call[1].items) != 4 {
			t.Fatalf("a test(...) of another shape: %v", call)
		}
		it := call[1].items
		cases = append(cases, schemaCase{it[0].s == "SUCCESS", it[1].s, it[2].s, it[3].s})
	}
	if len(cases) < 50 {
		t.Fatalf("only %d cases read from test-json-schema-to-grammar.cpp", len(cases))
	}
	return cases
}

// The pin's JSON-schema conversion cases give the pin's grammars, and
// fail where the pin's fail.
func TestSchemaToGrammarPinCases(t *testing.T) {
	for _, c := range pinSchemaCases(t) {
		v, err := ojson.ParseString(c.schema)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := FromJSONSchema(v, true)
		if !c.ok {
			var ce *ConversionError
			if !errors.As(err, &ce) {
				t.Errorf("%s: got %v, %q; want a conversion error", c.name, err, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if trimGrammar(got) != trimGrammar(c.grammar) {
			t.Errorf("%s:\n%s\ngot\n%s\nwant\n%s", c.name, c.schema, got, c.grammar)
		}
	}
}

// The two cases of the pin's main(): a parsed document gives the grammar
// the JSON gives, recursion included; a property's node built alone names
// its $ref rule.
func TestSchemaDocumentAndBuild(t *testing.T) {
	v, _ := ojson.ParseString(`{
		"$ref": "#/$defs/node",
		"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "leaf": {}}, "additionalProperties": false}}}`)
	doc, err := ParseSchema(v)
	if err != nil {
		t.Fatal(err)
	}
	a, err1 := FromDocument(doc, BuildOptions{})
	b, err2 := FromJSONSchema(v, true)
	if err1 != nil || err2 != nil || a != b || !strings.Contains(a, "ref-defs-node-next") {
		t.Fatalf("%v %v\n%s\n%s", err1, err2, a, b)
	}

	v, _ = ojson.ParseString(`{
		"type": "object",
		"properties": {"item": {"$ref": "#/$defs/item"}},
		"$defs": {"item": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}}}`)
	doc, err = ParseSchema(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Build(func(b *Builder) { b.AddSchema("root", doc.Root.Properties[0].Schema) }, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `
		char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
		ref-defs-item ::= "{" space ref-defs-item-a-kv space "}"
		ref-defs-item-a-kv ::= "\"a\"" space ":" space string
		root ::= ref-defs-item
		space ::= | " " | "\n"{1,2} [ \t]{0,20}
		string ::= "\"" char* "\""`
	if trimGrammar(got) != trimGrammar(want) {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// AddRule: names cleaned, a clash numbered, the same rule kept
	got, _ = Build(func(b *Builder) {
		for _, r := range [][2]string{{"a b", `"x"`}, {"a-b", `"y"`}, {"a.b", `"x"`}, {"a b", `"z"`}, {"root", `a-b a-b0 a-b1`}} {
			b.AddRule(r[0], r[1])
		}
	}, BuildOptions{})
	want = "a-b ::= \"x\"\na-b0 ::= \"y\"\na-b1 ::= \"z\"\nroot ::= a-b a-b0 a-b1\nspace ::= " + spaceRule + "\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func parseDoc(t *testing.T, schema string) *Document {
	t.Helper()
	v, err := ojson.ParseString(schema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ParseSchema(v)
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	return doc
}

func kindOf(t *testing.T, s *Schema, k SchemaKind, what string) *Schema {
	t.Helper()
	if s == nil || s.Kind != k {
		t.Fatalf("%s: %+v, want a %s", what, s, k)
	}
	return s
}

// A port of the pin's test-json-schema.cpp: the nodes ParseSchema builds.
func TestParseSchemaNodes(t *testing.T) {
	root := func(schema string, k SchemaKind) *Schema { return kindOf(t, parseDoc(t, schema).Root, k, schema) }
	if d := parseDoc(t, `{}`); d.Root.Kind != KindAny || len(d.Refs) != 0 {
		t.Fatalf("{}: %+v", d)
	}
	root(`{"description": "x", "format": "email", "additionalProperties": true}`, KindAny)
	root(`{"type": "null"}`, KindNull)
	root(`{"type": "boolean"}`, KindBoolean)
	root(`{"type": "number", "minimum": 1, "maximum": 2}`, KindNumber)

	for _, c := range []struct {
		schema   string
		min, max int64
	}{
		{`{"type": "integer"}`, math.MinInt64, math.MaxInt64},
		{`{"type": "integer", "minimum": -5, "maximum": 10}`, -5, 10},
		{`{"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}`, 1, 9},
		{`{"type": "integer", "minimum": 1.5, "exclusiveMaximum": 9.5}`, 2, 9},
	} {
		if i := root(c.schema, KindInteger); i.Minimum != c.min || i.Maximum != c.max {
			t.Errorf("%s: %d..%d", c.schema, i.Minimum, i.Maximum)
		}
	}

	if s := root(`{"type": "string"}`, KindString); s.Pattern != "" || s.Format != FormatNone || s.MinLength != 0 || s.MaxLength != -1 {
		t.Errorf("string defaults: %+v", s)
	}
	if s := root(`{"type": "string", "pattern": "^[a-z]+$", "format": "date", "minLength": 2, "maxLength": 8}`, KindString); s.Pattern != "^[a-z]+$" || s.Format != FormatDate || s.MinLength != 2 || s.MaxLength != 8 {
		t.Errorf("string keywords: %+v", s)
	}
	for f, want := range map[string]StringFormat{"time": FormatTime, "date-time": FormatDateTime, "uuid": FormatUUID, "uuid5": FormatUUID, "email": FormatNone, "uuid6": FormatNone} {
		if s := root(`{"type": "string", "format": "`+f+`"}`, KindString); s.Format != want {
			t.Errorf("format %s: %d", f, s.Format)
		}
	}
	root(`{"pattern": "^a$"}`, KindString)
	if s := root(`{"minLength": 1, "maxLength": 3}`, KindString); s.MinLength != 1 || s.MaxLength != 3 {
		t.Errorf("lengths: %+v", s)
	}
	root(`{"format": "uuid"}`, KindString)

	if a := root(`{"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}`, KindArray); a.Items.Kind != KindInteger || a.MinItems != 1 || a.MaxItems != 3 {
		t.Errorf("array: %+v", a)
	}
	if a := root(`{"type": "array"}`, KindArray); a.Items.Kind != KindAny || a.MinItems != 0 || a.MaxItems != -1 {
		t.Errorf("array: %+v", a)
	}
	kindOf(t, root(`{"items": {"type": "string"}}`, KindArray).Items, KindString, "items")
	if tu := root(`{"prefixItems": [{"type": "string"}, {"type": "number"}]}`, KindTuple); len(tu.Tuple) != 2 || tu.Tuple[0].Kind != KindString || tu.Tuple[1].Kind != KindNumber {
		t.Errorf("tuple: %+v", tu)
	}
	if tu := root(`{"type": "array", "items": [{"type": "boolean"}]}`, KindTuple); len(tu.Tuple) != 1 || tu.Tuple[0].Kind != KindBoolean {
		t.Errorf("tuple: %+v", tu)
	}

	if o := root(`{"type": "object"}`, KindObject); len(o.Properties) != 0 || o.AdditionalProperties.Kind != KindAny {
		t.Errorf("object: %+v", o)
	}
	o := root(`{"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}, "c": {"type": "boolean"}}, "required": ["a", "c"]}`, KindObject)
	if len(o.Properties) != 3 || o.Properties[0].Name != "b" || o.Properties[1].Name != "a" || o.Properties[2].Name != "c" ||
		o.Properties[0].Required || !o.Properties[1].Required || !o.Properties[2].Required ||
		o.Properties[0].Schema.Kind != KindString || o.Properties[1].Schema.Kind != KindInteger || o.Properties[2].Schema.Kind != KindBoolean || o.AdditionalProperties != nil {
		t.Errorf("properties: %+v", o)
	}
	if o := root(`{"properties": {"a": {}}, "required": ["a", "zzz", 1]}`, KindObject); len(o.Properties) != 1 || !o.Properties[0].Required {
		t.Errorf("required: %+v", o)
	}
	if o := root(`{"additionalProperties": false}`, KindObject); len(o.Properties) != 0 || o.AdditionalProperties != nil {
		t.Errorf("closed: %+v", o)
	}
	if o := root(`{"properties": {"a": {}}, "additionalProperties": {"type": "integer", "minimum": 0}}`, KindObject); kindOf(t, o.AdditionalProperties, KindInteger, "additional").Minimum != 0 {
		t.Errorf("additional: %+v", o)
	}
	inner := kindOf(t, root(`{"properties": {"inner": {"properties": {"leaf": {"type": "null"}}, "required": ["leaf"]}}}`, KindObject).Properties[0].Schema, KindObject, "inner")
	if inner.Properties[0].Name != "leaf" || !inner.Properties[0].Required || inner.Properties[0].Schema.Kind != KindNull {
		t.Errorf("nested: %+v", inner)
	}

	if c := root(`{"const": {"a": [1, null]}}`, KindConst); c.Value.String() != `{"a":[1,null]}` {
		t.Errorf("const: %s", c.Value)
	}
	e := root(`{"enum": ["a", 1, null, true]}`, KindEnum)
	if len(e.Values) != 4 || e.Values[0].String() != `"a"` || e.Values[1].String() != "1" || e.Values[2].String() != "null" || e.Values[3].String() != "true" {
		t.Errorf("enum: %v", e.Values)
	}
	root(`{"type": "integer", "enum": [1, 2]}`, KindEnum)
	if c := root(`{"type": "string", "const": "x", "enum": ["y"]}`, KindConst); c.Value.String() != `"x"` {
		t.Errorf("const over enum: %s", c.Value)
	}

	if u := root(`{"anyOf": [{"type": "string"}, {"type": "number"}]}`, KindAnyOf); len(u.Children) != 2 || u.Children[0].Kind != KindString || u.Children[1].Kind != KindNumber {
		t.Errorf("anyOf: %+v", u)
	}
	if u := root(`{"oneOf": [{"type": "null"}]}`, KindAnyOf); len(u.Children) != 1 || u.Children[0].Kind != KindNull {
		t.Errorf("oneOf: %+v", u)
	}
	if u := root(`{"type": "string", "oneOf": [{"type": "null"}], "anyOf": [{"type": "number"}, {"type": "boolean"}]}`, KindAnyOf); len(u.Children) != 1 || u.Children[0].Kind != KindNull {
		t.Errorf("oneOf first: %+v", u)
	}
	u := root(`{"type": ["string", "null", "integer"], "minLength": 2, "minimum": 5}`, KindAnyOf)
	if len(u.Children) != 3 || kindOf(t, u.Children[0], KindString, "0").MinLength != 2 || u.Children[1].Kind != KindNull || kindOf(t, u.Children[2], KindInteger, "2").Minimum != 5 {
		t.Errorf("type array: %+v", u)
	}

	if a := root(`{"allOf": [{"properties": {"a": {}}}, {"anyOf": [{"properties": {"b": {}}}, {"type": "null"}]}]}`, KindAllOf); len(a.Children) != 2 || a.Children[0].Kind != KindObject || a.Children[1].Kind != KindAnyOf {
		t.Errorf("allOf: %+v", a)
	}
	root(`{"type": "object", "allOf": [{"properties": {"a": {}}}]}`, KindAllOf)
	if o := root(`{"type": "object", "properties": {"a": {}}, "allOf": [{"properties": {"b": {}}}]}`, KindObject); len(o.Properties) != 1 {
		t.Errorf("properties over allOf: %+v", o)
	}
	root(`{"type": "integer", "allOf": [{"minimum": 1}]}`, KindInteger)

	d := parseDoc(t, `{"$ref": "#/$defs/t", "type": "string", "$defs": {"t": {"type": "boolean"}}}`)
	if r := kindOf(t, d.Root, KindRef, "root"); r.Ref != "#/$defs/t" || len(d.Refs) != 1 || r.Target != d.Refs["#/$defs/t"] || r.Target.Kind != KindBoolean {
		t.Errorf("ref: %+v %v", r, d.Refs)
	}
	r := kindOf(t, root(`{"properties": {"a": {"$ref": "#/definitions/t"}}, "definitions": {"t": {"type": "number"}}}`, KindObject).Properties[0].Schema, KindRef, "a")
	kindOf(t, r.Target, KindNumber, "target")
	d = parseDoc(t, `{"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {"value": {"type": "number"}, "next": {"$ref": "#/$defs/node"}}, "required": ["value"]}}}`)
	node := kindOf(t, d.Root.Target, KindObject, "node")
	if next := kindOf(t, node.Properties[1].Schema, KindRef, "next"); next.Target != d.Root.Target || len(d.Refs) != 1 {
		t.Errorf("cycle: %+v", next)
	}
	kindOf(t, kindOf(t, root(`{"oneOf": [{"type": "null"}, {"$ref": "#/oneOf/0"}]}`, KindAnyOf).Children[1], KindRef, "1").Target, KindNull, "target")
}

// may_be_string and value_types, as the pin's test-json-schema.cpp
// checks them.
func TestSchemaTypes(t *testing.T) {
	for schema, want := range map[string]bool{
		`{"type": "string"}`: true, `{"type": "integer"}`: false, `{"minLength": 1}`: true, `{"pattern": "^[a-z]+$"}`: true,
		`{"const": "hello"}`: true, `{"const": 123}`: false, `{"enum": [1, "a", null]}`: true, `{"enum": [1, 2, 3]}`: false,
		`{"type": ["integer", "string"]}`: true, `{"anyOf": [{"type": "integer"}, {"type": "boolean"}]}`: false,
		`{"allOf": [{"type": "string"}, {"minLength": 1}]}`: true, `{"allOf": [{"type": "string"}, {"type": "integer"}]}`: false,
		`{"allOf": [{"minLength": 1}, {"maxLength": 2}]}`:                                                                                                             true,
		`{"$ref": "#/$defs/n", "$defs": {"n": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "string"}]}}}`:                                                               true,
		`{"$ref": "#/$defs/n", "$defs": {"n": {"$ref": "#/$defs/n"}}}`:                                                                                                false,
		`{"anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}], "$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}, {"type": "integer"}]}, "b": {"type": "string"}}}`: true,
	} {
		if got := parseDoc(t, schema).Root.MayBeString(); got != want {
			t.Errorf("may be string %s: %v", schema, got)
		}
	}
	for schema, want := range map[string]TypeSet{
		`{"type": "string"}`: Types(TypeString), `{"type": "number"}`: Types(TypeNumber, TypeInteger), `{"description": "x"}`: AllTypes(),
		`{"properties": {"a": {"type": "string"}}}`: Types(TypeObject), `{"items": {"type": "string"}}`: Types(TypeArray),
		`{"const": 1.5}`: Types(TypeNumber), `{"enum": [1, "a", null]}`: Types(TypeInteger, TypeString, TypeNull),
		`{"type": ["string", "null"]}`: Types(TypeString, TypeNull),
		`{"allOf": [{"type": ["string", "number"]}, {"type": ["number", "object"]}]}`:                   Types(TypeNumber, TypeInteger),
		`{"allOf": [{"type": "string"}, {"type": "integer"}]}`:                                          0,
		`{"$ref": "#/$defs/n", "$defs": {"n": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "string"}]}}}`: Types(TypeString),
	} {
		if got := parseDoc(t, schema).Root.ValueTypes(); got != want {
			t.Errorf("value types %s: %b, want %b", schema, got, want)
		}
	}
	if !Types(TypeString).IsOnly(TypeString) || Types(TypeString, TypeNull).IsOnly(TypeString) || !TypeSet(0).Empty() || KindAnyOf.String() != "anyOf" || TypeInteger.String() != "integer" {
		t.Error("type set helpers")
	}
}

// pinSchemaErrors are the assert_error cases of the pin's
// tests/test-json-schema.cpp: a schema and what its error must say.
func pinSchemaErrors(t *testing.T) [][2]string {
	var cases [][2]string
	for _, call := range cppCalls(t, pinTest(t, "test-json-schema.cpp"), "assert_error") {
		if len(call) != 4 || call[2].kind != 's' || call[3].kind != 's' {
			t.Fatalf("an assert_error of another shape: %v", call)
		}
		cases = append(cases, [2]string{call[2].s, call[3].s})
	}
	if len(cases) < 15 {
		t.Fatalf("only %d error cases read from test-json-schema.cpp", len(cases))
	}
	return cases
}

// What the pin refuses, refused with its message (test-json-schema.cpp's
// assert_error cases, read from its source).
func TestParseSchemaErrors(t *testing.T) {
	for _, c := range pinSchemaErrors(t) {
		v, err := ojson.ParseString(c[0])
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseSchema(v)
		var se *SchemaError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c[1]) {
			t.Errorf("%s: %v, want an error saying %q", c[0], err, c[1])
		}
		_, err = FromJSONSchema(v, false)
		var ce *ConversionError
		if !errors.As(err, &ce) || !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "JSON schema conversion failed:\nJSON schema error at ") {
			t.Errorf("%s: converted: %v", c[0], err)
		}
	}
}

// A pathological schema is bounded where the pin is not: an allOf that
// leads back to itself (the pin recurses until its stack overflows) is
// refused; many optional properties cost linear work (the pin's is
// cubic) for the pin's grammar; a schema whose grammar would pass
// MaxGrammarBytes is refused.
func TestSchemaBounds(t *testing.T) {
	for _, s := range []string{
		`{"allOf":[{"$ref":"#/$defs/d0"}],"$defs":{"d0":{"$ref":"#/$defs/d0"}}}`,
		`{"allOf":[{"properties":{"a":{}}},{"$ref":"#/$defs/d1"}],"$defs":{"d1":{"properties":{"x":{"allOf":[{"$ref":"#/$defs/d1"}]}}}}}`,
	} {
		v, _ := ojson.ParseString(s)
		_, err := FromJSONSchema(v, true)
		var ce *ConversionError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "refers back to itself without end") {
			t.Errorf("%s: %v", s, err)
		}
	}

	var props []string
	for i := range 3000 {
		props = append(props, `"p`+strconv.Itoa(i)+`":{"type":"integer"}`)
	}
	v, _ := ojson.ParseString(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`)
	g, err := FromJSONSchema(v, true)
	if err != nil || strings.Count(g, "-rest ::= ") != 2999 {
		t.Fatalf("3000 optional properties: %v, %d rest rules", err, strings.Count(g, "-rest ::= "))
	}

	deep := strings.Repeat(`{"properties":{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa":`, 3000) + "{}" + strings.Repeat("}}", 3000)
	v, err = ojson.ParseString(deep)
	if err != nil {
		t.Fatal(err)
	}
	_, err = FromJSONSchema(v, true)
	if err == nil || !strings.Contains(err.Error(), "would exceed 32 MiB") {
		t.Fatalf("a deep schema: %v", err)
	}
}
