// Port of llama.cpp common/preset.cpp (v0.5.0): the INI presets file
// (load_from_ini, parse_ini_from_file), the models directory
// (load_from_models_dir) and the cascade of presets, as llama-server's
// router (tools/server/server-models.cpp, load_models) reads them.

package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Setting is one option of a preset: a key as the presets file spells it
// (a llama-server option without its dashes, "ctx-size" or "c", or its
// environment variable, "LLAMA_ARG_CTX_SIZE") and its value.
type Setting struct {
	Key, Value string
}

// Preset is a model's settings by name, as common_preset holds them.
type Preset struct {
	Name     string
	Settings []Setting
}

// get is the value of the last setting whose key is one of keys.
func (p *Preset) get(keys ...string) (string, bool) {
	for i := len(p.Settings) - 1; i >= 0; i-- {
		if slices.Contains(keys, p.Settings[i].Key) {
			return p.Settings[i].Value, true
		}
	}
	return "", false
}

// set replaces the settings of keys by one of keys[0].
func (p *Preset) set(value string, keys ...string) {
	p.unset(keys...)
	p.Settings = append(p.Settings, Setting{keys[0], value})
}

func (p *Preset) unset(keys ...string) {
	p.Settings = slices.DeleteFunc(p.Settings, func(s Setting) bool { return slices.Contains(keys, s.Key) })
}

// merge puts other's settings after p's (common_preset::merge: other's
// win).
func (p *Preset) merge(other Preset) {
	for _, s := range other.Settings {
		p.Settings = append(slices.DeleteFunc(p.Settings, func(t Setting) bool { return t.Key == s.Key }), s)
	}
}

// presetDefaultName is COMMON_PRESET_DEFAULT_NAME: the section of the
// settings before any header.
const presetDefaultName = "default"

// canonicalTag is canonical_tag: a section name's ":tag" made upper case,
// and of a tag such as "model-Q4_K_M" or "v1.q8_0" only its last part.
var tagRe = regexp.MustCompile(`(?i)[-.]([A-Z0-9_]+)$`)

func canonicalTag(tag string) string {
	if m := tagRe.FindStringSubmatch(tag); m != nil {
		return strings.ToUpper(m[1])
	}
	return strings.ToUpper(tag)
}

// iniSection is one section of a presets file, its keys in file order
// (the last of a repeated key).
type iniSection struct {
	name string
	keys []Setting
}

// parseINI is parse_ini_from_file: the grammar of the pin's PEG parser
// (header, key = value, comment and blank lines; a value ends before
// blanks followed by ';', '#' or the end of the line). A line of none of
// these kinds fails the whole file, as the pin's parser does. A section
// header seen again starts the section anew.
func parseINI(path string, data []byte) ([]iniSection, error) {
	text := string(data)
	cur := presetDefaultName
	order := []string{}
	secs := map[string]*iniSection{}
	section := func(name string, reset bool) *iniSection {
		s, ok := secs[name]
		if !ok || reset {
			if !ok {
				order = append(order, name)
			}
			s = &iniSection{name: name}
			secs[name] = s
		}
		return s
	}
	for len(text) > 0 {
		line, rest := cutLine(text)
		text = rest
		body := strings.TrimLeft(line, " \t")
		switch {
		case body == "" || body[0] == ';' || body[0] == '#':
			// blank or comment line
		case line[0] == '[':
			// header-line: "[" ws name ws "]" eol; the name is every
			// character up to the first ']'
			inner := strings.TrimLeft(line[1:], " \t")
			name, after, ok := strings.Cut(inner, "]")
			if !ok || !isEOL(after) {
				return nil, fmt.Errorf("failed to parse server config file: %s", path)
			}
			cur = name
			section(cur, true)
		default:
			key, value, ok := parseKV(line)
			if !ok {
				return nil, fmt.Errorf("failed to parse server config file: %s", path)
			}
			s := section(cur, false)
			s.keys = slices.DeleteFunc(s.keys, func(t Setting) bool { return t.Key == key })
			s.keys = append(s.keys, Setting{key, value})
		}
	}
	out := make([]iniSection, 0, len(order))
	for _, n := range order {
		out = append(out, *secs[n])
	}
	return out, nil
}

// cutLine splits text at its first newline ("\r\n", "\n" or "\r").
func cutLine(text string) (line, rest string) {
	i := strings.IndexAny(text, "\r\n")
	if i < 0 {
		return text, ""
	}
	if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
		return text[:i], text[i+2:]
	}
	return text[:i], text[i+1:]
}

// isEOL is the grammar's eol after a header: blanks, then a comment or
// nothing.
func isEOL(s string) bool {
	s = strings.TrimLeft(s, " \t")
	return s == "" || s[0] == ';' || s[0] == '#'
}

// parseKV is the kv-line: ident ws "=" ws value eol, ident =
// [a-zA-Z_][a-zA-Z0-9_.-]*.
func parseKV(line string) (key, value string, ok bool) {
	i := 0
	for i < len(line) && (isAlpha(line[i]) || line[i] == '_' || i > 0 && (isDigit(line[i]) || line[i] == '.' || line[i] == '-')) {
		i++
	}
	if i == 0 {
		return "", "", false
	}
	key = line[:i]
	rest := strings.TrimLeft(line[i:], " \t")
	if rest == "" || rest[0] != '=' {
		return "", "", false
	}
	rest = strings.TrimLeft(rest[1:], " \t")
	// value: up to the first place where blanks, then ';', '#' or the
	// end of the line follow
	end := len(rest)
	for j := 0; j < len(rest); j++ {
		if isEOL(rest[j:]) {
			end = j
			break
		}
	}
	return key, rest[:end], true
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// loadINI is load_from_ini: the presets of the file by name, and its
// global section ("[*]"), which every model's settings start from.
// Section names' ":tag" is made canonical; the "version" key is skipped;
// an empty default section is left out.
func loadINI(path string) (map[string]Preset, Preset, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, Preset{}, fmt.Errorf("preset file does not exist: %s", path)
		}
		return nil, Preset{}, fmt.Errorf("failed to open server preset file: %s: %w", path, err)
	}
	secs, err := parseINI(path, data)
	if err != nil {
		return nil, Preset{}, err
	}
	out := map[string]Preset{}
	var global Preset
	for _, s := range secs {
		name := s.name
		if name == "" {
			name = presetDefaultName
		}
		if name != "*" && name != presetDefaultName {
			if i := strings.LastIndexByte(name, ':'); i >= 0 {
				if tag := name[i+1:]; canonicalTag(tag) != tag {
					name = name[:i+1] + canonicalTag(tag)
				}
			}
		}
		p := Preset{Name: name}
		for _, kv := range s.keys {
			if kv.Key == "version" {
				continue
			}
			p.Settings = append(p.Settings, kv)
		}
		if p.Name == presetDefaultName && len(p.Settings) == 0 {
			continue
		}
		if p.Name == "*" {
			global = p
		} else {
			out[p.Name] = p
		}
	}
	return out, global, nil
}

// draftPrefixes are the file names of the speculative drafts a models
// directory holds beside a model (draft_prefixes).
var draftPrefixes = []string{"mtp-", "dspark-", "dflash-"}

func isMmprojFile(name string) bool { return strings.Contains(name, "mmproj") }

func isDraftFile(name string) bool {
	for _, p := range draftPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Keys of the settings a models directory and the router write.
var (
	keyModel  = []string{"model", "m", "LLAMA_ARG_MODEL"}
	keyMmproj = []string{"mmproj", "mm", "LLAMA_ARG_MMPROJ"}
	keyDraft  = []string{"model-draft", "spec-draft-model", "md", "LLAMA_ARG_SPEC_DRAFT_MODEL"}
)

// loadModelsDir is load_from_models_dir: each GGUF file at the top of
// dir is a model named after the file (".gguf" removed), but projectors
// ("mmproj" in the name) and drafts; each subdirectory is a model of its
// name: its first split ("-00001-of-"), else its GGUF file, with the
// projector and the draft beside it. Entries are read in the
// directory's order, as the pin reads them: where a subdirectory holds
// two model files (or projectors, or drafts), the choice is the file
// system's, the same as the pin's.
func loadModelsDir(dir string) (map[string]Preset, error) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("error: '%s' does not exist or is not a directory", dir)
	}
	out := map[string]Preset{}
	add := func(name, path, mmproj, draft string) {
		p := Preset{Name: name}
		p.set(path, keyModel...)
		if mmproj != "" {
			p.set(mmproj, keyMmproj...)
		}
		if draft != "" {
			p.set(draft, keyDraft...)
		}
		out[name] = p
	}
	for _, e := range listDir(dir, true) {
		if e.dir {
			var model, shard, mmproj, draft string
			for _, f := range listDir(e.path, false) {
				switch {
				case !strings.HasSuffix(f.name, ".gguf"):
				case isMmprojFile(f.name):
					mmproj = f.path
				case isDraftFile(f.name):
					if draft == "" {
						draft = f.path // the first one found wins
					}
				case strings.Contains(f.name, "-00001-of-"):
					shard = f.path
				default:
					model = f.path
				}
			}
			if shard != "" {
				model = shard
			}
			if model != "" {
				add(e.name, model, mmproj, draft)
			}
			continue
		}
		if !strings.HasSuffix(e.name, ".gguf") || isMmprojFile(e.name) || isDraftFile(e.name) {
			continue
		}
		add(strings.ReplaceAll(e.name, ".gguf", ""), e.path, "", "")
	}
	return out, nil
}

type dirEntry struct {
	name, path string
	dir        bool
}

// listDir is fs_list: the regular files of dir (symbolic links
// followed) and, with dirs, its directories, in the directory's order;
// entries that cannot be inspected are skipped.
func listDir(dir string, dirs bool) []dirEntry {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	es, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil
	}
	var out []dirEntry
	for _, e := range es {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		switch {
		case fi.Mode().IsRegular():
			out = append(out, dirEntry{e.Name(), p, false})
		case dirs && fi.IsDir():
			out = append(out, dirEntry{e.Name(), p, true})
		}
	}
	return out
}

// cascade is common_preset_context::cascade(base, presets): every preset
// starts from base's settings.
func cascade(base Preset, presets map[string]Preset) map[string]Preset {
	out := make(map[string]Preset, len(presets))
	for name, p := range presets {
		c := Preset{Name: name, Settings: slices.Clone(base.Settings)}
		c.merge(p)
		out[name] = c
	}
	return out
}
