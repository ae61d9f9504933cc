// Port of llama.cpp common/common.cpp (v0.5.0): the model's own sampling
// defaults, as common_init_from_params reads them
// (common_params_sampling_config).

package sample

import (
	"math"
	"strconv"
	"strings"

	"github.com/ggload/ggload/gguf"
)

// Set names fields of Params: those whose value is meant as it is, zero
// included (Params.Explicit), which a model's own sampling defaults leave
// alone (llama.cpp's common_params_sampling_config, for every field).
type Set uint64

// The fields of Params; the first twelve are those a model's
// general.sampling.* metadata can set.
const (
	SetSamplers Set = 1 << iota
	SetTopK
	SetTopP
	SetMinP
	SetXTCProbability
	SetXTCThreshold
	SetTemp
	SetPenaltyLastN
	SetPenaltyRepeat
	SetMirostat
	SetMirostatTau
	SetMirostatEta
	SetSeed
	SetNPrev
	SetTypP
	SetDynatempExponent
	SetDryBase
	SetDryAllowedLength
	SetDryPenaltyLastN
	SetDrySequenceBreakers
	SetAdaptiveTarget
	SetAdaptiveDecay
	SetTopNSigma

	// SetAll names every field: a Params whose every value is meant as it
	// is, as one filled in from a request over resolved defaults.
	SetAll = SetTopNSigma<<1 - 1
)

// FromModel applies the sampling defaults a model carries in its
// general.sampling.* metadata to every field the user left unset (zero,
// or for the samplers an empty list, and not in Explicit), as
// common_init_from_params does before it builds the sampler: each value
// read as llama_model_meta_val_str prints it and parsed as strtol or
// strtof parse it, so that a value llama.cpp cannot read leaves the field
// as it was (its default, then). A field it sets is named in Explicit.
func (p *Params) FromModel(m *gguf.Model) {
	unset := func(zero bool, s Set) bool { return zero && p.Explicit&s == 0 }
	if unset(len(p.Samplers) == 0, SetSamplers) {
		if s, ok := metaString(m, "general.sampling.sequence", 512); ok {
			kinds, _ := ParseSamplers(s)
			p.Samplers, p.Explicit = kinds, p.Explicit|SetSamplers
		}
	}
	ints := []struct {
		key string
		dst *int32
		set Set
	}{
		{"general.sampling.top_k", &p.TopK, SetTopK},
		{"general.sampling.penalty_last_n", &p.PenaltyLastN, SetPenaltyLastN},
		{"general.sampling.mirostat", &p.Mirostat, SetMirostat},
	}
	for _, f := range ints {
		if !unset(*f.dst == 0, f.set) {
			continue
		}
		if s, ok := metaString(m, f.key, 64); ok {
			if v, ok := strtol(s); ok {
				*f.dst, p.Explicit = v, p.Explicit|f.set
			}
		}
	}
	floats := []struct {
		key string
		dst *float32
		set Set
	}{
		{"general.sampling.top_p", &p.TopP, SetTopP},
		{"general.sampling.min_p", &p.MinP, SetMinP},
		{"general.sampling.xtc_probability", &p.XTCProbability, SetXTCProbability},
		{"general.sampling.xtc_threshold", &p.XTCThreshold, SetXTCThreshold},
		{"general.sampling.temp", &p.Temp, SetTemp},
		{"general.sampling.penalty_repeat", &p.PenaltyRepeat, SetPenaltyRepeat},
		{"general.sampling.mirostat_tau", &p.MirostatTau, SetMirostatTau},
		{"general.sampling.mirostat_eta", &p.MirostatEta, SetMirostatEta},
	}
	for _, f := range floats {
		if !unset(*f.dst == 0, f.set) {
			continue
		}
		if s, ok := metaString(m, f.key, 128); ok {
			if v, ok := strtof(s); ok {
				*f.dst, p.Explicit = v, p.Explicit|f.set
			}
		}
	}
}

// metaString is llama_model_meta_val_str into a buffer of size bytes: a
// scalar printed as gguf_kv_to_str prints it (std::to_string for numbers),
// cut to size-1 bytes; false where the key is absent or no scalar.
func metaString(m *gguf.Model, key string, size int) (string, bool) {
	v, ok := m.Lookup(key)
	if !ok || v.IsArray() {
		return "", false
	}
	var s string
	switch v.Kind() {
	case gguf.TypeString:
		s, _ = v.Str()
	case gguf.TypeFloat32, gguf.TypeFloat64:
		f, _ := v.Float()
		s = strconv.FormatFloat(f, 'f', 6, 64) // std::to_string: "%f"
	case gguf.TypeBool:
		b, _ := v.Bool()
		s = strconv.FormatBool(b)
	case gguf.TypeInt8, gguf.TypeInt16, gguf.TypeInt32, gguf.TypeInt64:
		i, _ := v.Int()
		s = strconv.FormatInt(i, 10)
	default:
		u, _ := v.Uint()
		s = strconv.FormatUint(u, 10)
	}
	if len(s) > size-1 {
		s = s[:size-1]
	}
	return s, true
}

// strtol is strtol(s, &end, 10) stored into an int32 as the C++ stores it:
// the longest prefix of spaces, a sign and digits; false where no digit
// was read. A value past long's range saturates as strtol's does, and the
// conversion to int32 keeps the low 32 bits.
func strtol(s string) (int32, bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var v uint64
	over := false
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			over = true
		} else {
			v = v*10 + d
		}
		i++
	}
	if i == start {
		return 0, false
	}
	var l int64
	switch {
	case !neg && (over || v > math.MaxInt64):
		l = math.MaxInt64
	case neg && (over || v > 1<<63):
		l = math.MinInt64
	case neg:
		l = -int64(v)
	default:
		l = int64(v)
	}
	return int32(l), true
}

// strtof is strtof(s, &end) of a decimal value: the longest prefix that
// reads as a float (spaces, a sign, digits with one point, an exponent),
// or inf/nan; false where nothing was read.
func strtof(s string) (float32, bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	start := i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	rest := strings.ToLower(s[i:])
	for _, w := range []string{"infinity", "inf", "nan"} {
		if strings.HasPrefix(rest, w) {
			f, err := strconv.ParseFloat(s[start:i]+w, 32)
			if err != nil {
				return 0, false
			}
			return float32(f), true
		}
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j {
			i = k
		}
	}
	f, err := strconv.ParseFloat(s[start:i], 32)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return 0, false
	}
	return float32(f), true // out of range: ±inf or 0, as strtof gives
}

func isCSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }
