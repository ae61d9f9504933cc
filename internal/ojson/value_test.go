package ojson

import (
	"strings"
	"testing"
)

func TestObjectOrderAndEdits(t *testing.T) {
	var v Value
	v.Set("b", IntValue(1))
	v.Set("a", StringValue("x"))
	v.Set("b", BoolValue(true)) // keeps its place
	for i := 0; i < 20; i++ {   // past the index threshold
		v.Set(string(rune('c'+i)), UintValue(uint64(i)))
	}
	if got := strings.Join(v.Keys()[:3], ","); got != "b,a,c" {
		t.Fatalf("keys %s", got)
	}
	if !v.Delete("a") || v.Delete("a") || v.Has("a") || v.At("e").Uint() != 2 {
		t.Fatalf("delete or lookup after it: %s", v)
	}
	c := v.Clone()
	c.Set("b", NullValue())
	if !v.At("b").Bool() || !c.At("b").IsNull() {
		t.Fatal("a clone shares its members")
	}
	var a Value
	a.Append(IntValue(1), FloatValue(1))
	if s, _ := a.Dump(-1); s != "[1,1.0]" {
		t.Fatalf("array %s", s)
	}
}

func TestEqualAcrossNumberKinds(t *testing.T) {
	x, _ := ParseString(`{"a":[1,2.0,-3],"b":{"c":null,"d":"e"}}`)
	y, _ := ParseString(`{"b":{"d":"e","c":null},"a":[1.0,2,-3.0]}`)
	z, _ := ParseString(`{"b":{"d":"e","c":null},"a":[1.0,2,-3.5]}`)
	if !Equal(x, y) || Equal(x, z) || Equal(IntValue(1), StringValue("1")) {
		t.Fatal("Equal")
	}
}

func TestFromGo(t *testing.T) {
	v, err := FromGo(map[string]any{"z": []any{1, "a", nil, true, 2.5}, "a": uint8(3)})
	if err != nil {
		t.Fatal(err)
	}
	if s := v.String(); s != `{"a":3,"z":[1,"a",null,true,2.5]}` {
		t.Fatal(s)
	}
	if _, err := FromGo(struct{}{}); err == nil {
		t.Fatal("a struct converted")
	}
}

func TestDepthBound(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2)
	if _, err := ParseString(deep); err == nil || !strings.Contains(err.Error(), "nesting deeper") {
		t.Fatalf("depth: %v", err)
	}
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := ParseString(ok); err != nil {
		t.Fatal(err)
	}
}

// Whatever the bytes, Parse answers without panicking, and what it reads
// dumps to text that reads back equal.
func FuzzParse(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseString(s)
		if err != nil {
			return
		}
		d := v.DumpSafe(-1)
		w, err := ParseString(d)
		if err != nil {
			t.Fatalf("%q dumped as %q, which does not parse: %v", s, d, err)
		}
		if w.DumpSafe(-1) != d {
			t.Fatalf("%q: %q then %q", s, d, w.DumpSafe(-1))
		}
	})
}
