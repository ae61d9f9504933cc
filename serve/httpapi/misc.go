package httpapi

import (
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
)

// validFilename is fs_validate_filename(name, false): one file name, no
// directory, nothing a file system would read otherwise.
func validFilename(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for i := 0; i < len(name); {
		c, n := utf8.DecodeRuneInString(name[i:])
		if c == utf8.RuneError && n <= 1 {
			return false
		}
		switch {
		case c <= 0x1F, c == 0x7F, c >= 0x80 && c <= 0x9F, c == 0xFF0E, c == 0x2215, c == 0x2216,
			c >= 0xD800 && c <= 0xDFFF, c > 0x10FFFF, c == 0xFFFD, c == 0xFEFF,
			strings.ContainsRune(`:*?"<>|/\`, c):
			return false
		}
		i += n
	}
	if name[0] == ' ' || name[len(name)-1] == ' ' || name[len(name)-1] == '.' {
		return false
	}
	return !strings.Contains(name, "..") && name != "."
}

// chatCaps is common_chat_templates_get_caps: the capabilities by name,
// in order.
func (m *Model) chatCaps() ojson.Value {
	o := ojson.ObjectValue()
	if m.Chat == nil {
		return o
	}
	caps := m.Chat.Caps()
	names := make([]string, 0, len(caps))
	for k := range caps {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		o.Set(k, ojson.BoolValue(caps[k]))
	}
	return o
}

// schemaToGrammar is json_schema_to_grammar.
func schemaToGrammar(s ojson.Value) (string, error) {
	return grammar.FromJSONSchema(s, false)
}

// chatSource is common_chat_templates_source.
func (m *Model) chatSource(variant string) string {
	if m.Chat == nil {
		return ""
	}
	return m.Chat.Source(variant)
}
