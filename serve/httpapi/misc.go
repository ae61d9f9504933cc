package httpapi

import (
	"errors"
	"strings"
	"unicode/utf8"

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

// chatCaps is common_chat_templates_get_caps.
func (m *Model) chatCaps() ojson.Value { return ojson.ObjectValue() }

// schemaToGrammar is json_schema_to_grammar.
func schemaToGrammar(ojson.Value) (string, error) {
	return "", errors.New("JSON schemas are not supported yet")
}
