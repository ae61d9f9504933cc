// Port of llama.cpp common/json-schema.cpp and common/json-schema.h (v0.5.0).

package grammar

import (
	"math"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/ojson"
)

// SchemaKind is common_chat_schema::node_kind: what a Schema node is.
type SchemaKind int

// The kinds, in node_kind's order.
const (
	KindAny SchemaKind = iota
	KindRef
	KindAnyOf
	KindAllOf
	KindConst
	KindEnum
	KindNull
	KindBoolean
	KindNumber
	KindInteger
	KindString
	KindArray
	KindTuple
	KindObject
)

var kindNames = [...]string{"any", "ref", "anyOf", "allOf", "const", "enum", "null", "boolean", "number", "integer", "string", "array", "tuple", "object"}

// String is common_chat_schema::kind_name: "anyOf", "object", ...; "?" for
// an unknown kind.
func (k SchemaKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "?"
}

// ValueType is common_chat_schema::value_type: a JSON value's type.
type ValueType int

// The value types, in value_type's order.
const (
	TypeNull ValueType = iota
	TypeBoolean
	TypeNumber
	TypeInteger
	TypeString
	TypeArray
	TypeObject
)

var typeNames = [...]string{"null", "boolean", "number", "integer", "string", "array", "object"}

// String is common_chat_schema::type_name; "?" for an unknown type.
func (t ValueType) String() string {
	if t >= 0 && int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "?"
}

// TypeSet is common_chat_schema::type_set: a set of value types.
type TypeSet uint32

// Types is the set of the types given.
func Types(types ...ValueType) TypeSet {
	var s TypeSet
	for _, t := range types {
		s = s.Add(t)
	}
	return s
}

// AllTypes is type_set::all: every value type.
func AllTypes() TypeSet {
	return Types(TypeNull, TypeBoolean, TypeNumber, TypeInteger, TypeString, TypeArray, TypeObject)
}

// Add is the set with t too.
func (s TypeSet) Add(t ValueType) TypeSet { return s | 1<<uint(t) }

// Has says whether t is in the set.
func (s TypeSet) Has(t ValueType) bool { return s&(1<<uint(t)) != 0 }

// IsOnly says whether t is the set's one type.
func (s TypeSet) IsOnly(t ValueType) bool { return s == 1<<uint(t) }

// Empty says whether the set has no type.
func (s TypeSet) Empty() bool { return s == 0 }

// StringFormat is common_chat_schema::string_format: the "format" of a
// string the converter knows.
type StringFormat int

// The formats.
const (
	FormatNone     StringFormat = iota
	FormatUUID                  // uuid, uuid1 .. uuid5
	FormatDate                  // date
	FormatTime                  // time
	FormatDateTime              // date-time
)

// Schema is one node of a parsed JSON schema (common_chat_schema and its
// subclasses, one struct): Kind says which fields hold its content.
type Schema struct {
	Kind SchemaKind

	// KindRef: the reference ("#/..."), and the node it names, owned by
	// the Document (a cycle is a Ref whose Target leads back to it).
	Ref    string
	Target *Schema

	// KindAnyOf (oneOf, anyOf, or a "type" array), KindAllOf.
	Children []*Schema

	// KindConst.
	Value ojson.Value

	// KindEnum.
	Values []ojson.Value

	// KindInteger: inclusive bounds, exclusiveMinimum and exclusiveMaximum
	// folded in; math.MinInt64 and math.MaxInt64 for unbounded.
	Minimum, Maximum int64

	// KindString: the pattern ("" when absent), the format, and the
	// length bounds (MaxLength -1 for unbounded).
	Pattern   string
	Format    StringFormat
	MinLength int
	MaxLength int

	// KindArray: the item schema (a KindAny node where "items" is absent)
	// and the bounds (MaxItems -1 for unbounded).
	Items    *Schema
	MinItems int
	MaxItems int

	// KindTuple: the schema of each item.
	Tuple []*Schema

	// KindObject: the properties in schema order, and the schema of any
	// other property (nil where none is allowed).
	Properties           []Property
	AdditionalProperties *Schema
}

// Property is common_chat_schema_property: one property of an object.
type Property struct {
	Name     string
	Schema   *Schema
	Required bool
}

// Document is common_chat_schema_document: the root node and the nodes
// that the $refs name, by reference.
type Document struct {
	Root *Schema
	Refs map[string]*Schema
}

// SchemaError is a schema outside the subset the converter knows, as
// common_chat_schema_from_json throws it: Error() is "JSON schema error at
// #/properties/a: unrecognized type nope".
type SchemaError struct {
	Path string // a JSON pointer into the schema: "#", "#/anyOf/1/items"
	Msg  string
}

func (e *SchemaError) Error() string { return "JSON schema error at " + e.Path + ": " + e.Msg }

// ParseSchema is common_chat_schema_from_json: the schema's nodes, with
// every $ref resolved within the document. A schema outside the subset
// gets a *SchemaError.
func ParseSchema(schema ojson.Value) (doc *Document, err error) {
	b := &schemaBuilder{root: schema, refs: map[string]*Schema{}}
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(*SchemaError)
			if !ok {
				panic(r)
			}
			doc, err = nil, se
		}
	}()
	root := b.node(schema, "#")
	for _, r := range b.pending {
		r.Target = b.refs[r.Ref]
	}
	return &Document{Root: root, Refs: b.refs}, nil
}

// schemaBuilder is common_chat_schema_builder; fail panics with a
// *SchemaError that ParseSchema returns.
type schemaBuilder struct {
	root ojson.Value
	refs map[string]*Schema
	// ref nodes get their target once every $ref is built, a cycle would
	// otherwise need it too early
	pending []*Schema
}

func fail(path, msg string) { panic(&SchemaError{Path: path, Msg: msg}) }

// count is get_count: a non-negative integer, read as nlohmann's get<int>
// reads it (the low 32 bits).
func count(schema ojson.Value, key, path string, def int) int {
	v, ok := schema.Get(key)
	if !ok {
		return def
	}
	n := int32(v.Int())
	if !v.IsInteger() || n < 0 {
		fail(path, key+" must be a non-negative integer")
	}
	return int(n)
}

// bound is get_bound: a fractional bound rounded inwards, towards the
// integers it still admits.
func bound(schema ojson.Value, key, path string, roundUp bool) int64 {
	v := schema.At(key)
	if v.IsInteger() {
		return v.Int()
	}
	if !v.IsNumber() {
		fail(path, key+" must be a number")
	}
	d := v.Float()
	if roundUp {
		return int64(math.Ceil(d))
	}
	return int64(math.Floor(d))
}

func format(schema ojson.Value, path string) StringFormat {
	v, ok := schema.Get("format")
	if !ok {
		return FormatNone
	}
	if !v.IsString() {
		fail(path, "format must be a string")
	}
	switch f := v.Str(); {
	case f == "date":
		return FormatDate
	case f == "time":
		return FormatTime
	case f == "date-time":
		return FormatDateTime
	case f == "uuid" || len(f) == 5 && f[:4] == "uuid" && f[4] >= '1' && f[4] <= '5':
		return FormatUUID
	}
	return FormatNone
}

func (b *schemaBuilder) resolve(ref, path string) ojson.Value {
	target := b.root
	tokens := strings.Split(ref[1:], "/")
	for _, sel := range tokens[1:] {
		switch {
		case target.IsObject() && target.Has(sel):
			target = target.At(sel)
		case target.IsArray():
			idx, ok := stoull(sel)
			if !ok || idx >= uint64(target.Len()) {
				fail(path, "cannot resolve $ref "+ref+", "+sel+" is out of range")
			}
			target = target.Index(int(idx))
		default:
			fail(path, "cannot resolve $ref "+ref+", "+sel+" not found")
		}
	}
	return target
}

// cNumber is what strtol and its kin read of s in base 10: after leading
// spaces, a sign and the digits; ok where there is a digit (what
// follows is left).
func cNumber(s string) (neg bool, digits string, ok bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return neg, s[start:i], i > start
}

// stoull is std::stoull(s) in base 10 (a minus negates, modulo 2^64);
// false where it throws (no digit, or past 2^64).
func stoull(s string) (uint64, bool) {
	neg, digits, ok := cNumber(s)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// stoi is std::stoi(s); false where it throws (no digit, or past int's
// range).
func stoi(s string) (int, bool) {
	neg, digits, ok := cNumber(s)
	if !ok {
		return 0, false
	}
	if neg {
		digits = "-" + digits
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int(v), true
}

func isCSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

func (b *schemaBuilder) ref(v ojson.Value, path string) *Schema {
	if !v.IsString() {
		fail(path, "$ref must be a string")
	}
	ref := v.Str()
	if !strings.HasPrefix(ref, "#/") {
		fail(path, "unsupported $ref "+ref+", only references into the same document are supported")
	}
	if _, ok := b.refs[ref]; !ok {
		// reserve the key first, so that a cycle back to this $ref stops here
		b.refs[ref] = nil
		b.refs[ref] = b.node(b.resolve(ref, path), ref)
	}
	n := &Schema{Kind: KindRef, Ref: ref}
	b.pending = append(b.pending, n)
	return n
}

func (b *schemaBuilder) alternatives(kind SchemaKind, alts ojson.Value, path string) *Schema {
	if !alts.IsArray() {
		fail(path, "must be an array of schemas")
	}
	if alts.Len() == 0 {
		fail(path, "must not be empty")
	}
	n := &Schema{Kind: kind}
	for i, alt := range alts.Elems() {
		n.Children = append(n.Children, b.node(alt, path+"/"+strconv.Itoa(i)))
	}
	return n
}

func (b *schemaBuilder) object(schema ojson.Value, path string) *Schema {
	n := &Schema{Kind: KindObject}
	required := map[string]bool{}
	if r := schema.At("required"); r.IsArray() {
		for _, name := range r.Elems() {
			if name.IsString() {
				required[name.Str()] = true
			}
		}
	}
	if props, ok := schema.Get("properties"); ok {
		if !props.IsObject() {
			fail(path, "properties must be an object")
		}
		for _, m := range props.Members() {
			n.Properties = append(n.Properties, Property{m.Key, b.node(m.Value, path+"/properties/"+m.Key), required[m.Key]})
		}
	}
	if add, ok := schema.Get("additionalProperties"); ok {
		switch {
		case add.IsBool():
			if add.Bool() {
				n.AdditionalProperties = &Schema{Kind: KindAny}
			}
		case add.IsObject():
			n.AdditionalProperties = b.node(add, path+"/additionalProperties")
		default:
			fail(path, "additionalProperties must be a boolean or a schema")
		}
	} else if !schema.Has("properties") {
		// {"type": "object"} on its own accepts any object
		n.AdditionalProperties = &Schema{Kind: KindAny}
	}
	return n
}

func (b *schemaBuilder) array(schema ojson.Value, path string) *Schema {
	n := &Schema{Kind: KindArray}
	if schema.Has("items") || schema.Has("prefixItems") {
		// "items" wins when both are present; a schema instead of an
		// array is the item schema
		key := "prefixItems"
		if schema.Has("items") {
			key = "items"
		}
		items := schema.At(key)
		if items.IsArray() {
			t := &Schema{Kind: KindTuple, Tuple: []*Schema{}}
			for i, item := range items.Elems() {
				t.Tuple = append(t.Tuple, b.node(item, path+"/"+key+"/"+strconv.Itoa(i)))
			}
			return t
		}
		n.Items = b.node(items, path+"/"+key)
	} else {
		n.Items = &Schema{Kind: KindAny}
	}
	n.MinItems = count(schema, "minItems", path, 0)
	n.MaxItems = count(schema, "maxItems", path, -1)
	return n
}

func (b *schemaBuilder) string(schema ojson.Value, path string) *Schema {
	n := &Schema{Kind: KindString}
	if p, ok := schema.Get("pattern"); ok {
		if !p.IsString() {
			fail(path, "pattern must be a string")
		}
		n.Pattern = p.Str()
	}
	n.Format = format(schema, path)
	n.MinLength = count(schema, "minLength", path, 0)
	n.MaxLength = count(schema, "maxLength", path, -1)
	return n
}

func (b *schemaBuilder) integer(schema ojson.Value, path string) *Schema {
	n := &Schema{Kind: KindInteger, Minimum: math.MinInt64, Maximum: math.MaxInt64}
	if schema.Has("minimum") {
		n.Minimum = bound(schema, "minimum", path, true)
	} else if schema.Has("exclusiveMinimum") {
		n.Minimum = bound(schema, "exclusiveMinimum", path, false) + 1
	}
	if schema.Has("maximum") {
		n.Maximum = bound(schema, "maximum", path, false)
	} else if schema.Has("exclusiveMaximum") {
		n.Maximum = bound(schema, "exclusiveMaximum", path, true) - 1
	}
	return n
}

func (b *schemaBuilder) node(schema ojson.Value, path string) *Schema {
	if !schema.IsObject() {
		fail(path, "schema must be an object")
	}
	if r, ok := schema.Get("$ref"); ok {
		return b.ref(r, path)
	}
	if schema.Has("oneOf") || schema.Has("anyOf") {
		key := "anyOf"
		if schema.Has("oneOf") {
			key = "oneOf"
		}
		return b.alternatives(KindAnyOf, schema.At(key), path+"/"+key)
	}
	typ := schema.At("type")
	if typ.IsArray() {
		// {"type": ["a", "b"], ...} is {"anyOf": [{"type": "a", ...}, {"type": "b", ...}]}
		if typ.Len() == 0 {
			fail(path, "type must not be empty")
		}
		n := &Schema{Kind: KindAnyOf}
		for i, t := range typ.Elems() {
			alt := schema.Clone()
			alt.Set("type", t)
			n.Children = append(n.Children, b.node(alt, path+"/type/"+strconv.Itoa(i)))
		}
		return n
	}
	if c, ok := schema.Get("const"); ok {
		return &Schema{Kind: KindConst, Value: c}
	}
	if values, ok := schema.Get("enum"); ok {
		if !values.IsArray() || values.Len() == 0 {
			fail(path, "enum must be a non-empty array")
		}
		return &Schema{Kind: KindEnum, Values: append([]ojson.Value(nil), values.Elems()...)}
	}
	if !typ.IsNull() && !typ.IsString() {
		fail(path, "type must be a string or an array of strings")
	}
	name := typ.Str()
	add, hasAdd := schema.Get("additionalProperties")
	hasProperties := schema.Has("properties") || hasAdd && !ojson.Equal(add, ojson.BoolValue(true))
	switch name {
	case "":
		// without a type the structural keywords decide, in the same
		// order as the converter
		switch {
		case hasProperties:
			return b.object(schema, path)
		case schema.Has("allOf"):
			return b.alternatives(KindAllOf, schema.At("allOf"), path+"/allOf")
		case schema.Has("items") || schema.Has("prefixItems"):
			return b.array(schema, path)
		case schema.Has("pattern") || schema.Has("minLength") || schema.Has("maxLength") || format(schema, path) != FormatNone:
			return b.string(schema, path)
		}
		return &Schema{Kind: KindAny}
	case "object":
		if !hasProperties && schema.Has("allOf") {
			return b.alternatives(KindAllOf, schema.At("allOf"), path+"/allOf")
		}
		return b.object(schema, path)
	case "string":
		if schema.Has("allOf") {
			return b.alternatives(KindAllOf, schema.At("allOf"), path+"/allOf")
		}
		return b.string(schema, path)
	case "array":
		return b.array(schema, path)
	case "integer":
		return b.integer(schema, path)
	case "number":
		return &Schema{Kind: KindNumber}
	case "boolean":
		return &Schema{Kind: KindBoolean}
	case "null":
		return &Schema{Kind: KindNull}
	}
	fail(path, "unrecognized type "+name)
	return nil
}

func jsonType(v ojson.Value) ValueType {
	switch {
	case v.IsNull():
		return TypeNull
	case v.IsBool():
		return TypeBoolean
	case v.IsInteger():
		return TypeInteger
	case v.IsNumber():
		return TypeNumber
	case v.IsString():
		return TypeString
	case v.IsArray():
		return TypeArray
	}
	return TypeObject
}

// ValueTypes is common_chat_schema::value_types: the types a value that
// matches the schema may have (a $ref cycle contributes none).
func (s *Schema) ValueTypes() TypeSet { return s.valueTypes(map[*Schema]bool{}) }

func (s *Schema) valueTypes(visited map[*Schema]bool) TypeSet {
	switch s.Kind {
	case KindAny:
		return AllTypes()
	case KindNull:
		return Types(TypeNull)
	case KindBoolean:
		return Types(TypeBoolean)
	case KindNumber:
		return Types(TypeNumber, TypeInteger)
	case KindInteger:
		return Types(TypeInteger)
	case KindString:
		return Types(TypeString)
	case KindArray, KindTuple:
		return Types(TypeArray)
	case KindObject:
		return Types(TypeObject)
	case KindConst:
		return Types(jsonType(s.Value))
	case KindEnum:
		var types TypeSet
		for _, v := range s.Values {
			types = types.Add(jsonType(v))
		}
		return types
	case KindRef:
		if s.Target == nil || visited[s.Target] {
			return 0
		}
		visited[s.Target] = true
		types := s.Target.valueTypes(visited)
		delete(visited, s.Target)
		return types
	case KindAnyOf:
		var types TypeSet
		for _, c := range s.Children {
			types |= c.valueTypes(visited)
		}
		return types
	case KindAllOf:
		types := AllTypes()
		for _, c := range s.Children {
			types &= c.valueTypes(visited)
		}
		return types
	}
	return 0
}

// MayBeString is common_chat_schema::may_be_string: whether a value that
// matches the schema may be a string, through any branch of it (a $ref
// cycle is taken as no string).
func (s *Schema) MayBeString() bool { return s.mayBeString(map[*Schema]bool{}) }

func (s *Schema) mayBeString(visited map[*Schema]bool) bool {
	switch s.Kind {
	case KindString:
		return true
	case KindConst:
		return s.Value.IsString()
	case KindEnum:
		for _, v := range s.Values {
			if v.IsString() {
				return true
			}
		}
		return false
	case KindRef:
		if s.Target == nil || visited[s.Target] {
			return false
		}
		visited[s.Target] = true
		r := s.Target.mayBeString(visited)
		delete(visited, s.Target)
		return r
	case KindAnyOf:
		for _, c := range s.Children {
			if c.mayBeString(visited) {
				return true
			}
		}
		return false
	case KindAllOf:
		// every child must allow a string, an any child constrains nothing
		any := false
		for _, c := range s.Children {
			if c.Kind == KindAny {
				continue
			}
			if !c.mayBeString(visited) {
				return false
			}
			any = true
		}
		return any
	}
	return false
}
