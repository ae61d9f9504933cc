package synth

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/graph"
)

// A model that llama.cpp loads may still abort it when a context builds
// the compute graph: the loader accepts a tensor it marks optional that
// the graph then reads, and checks few relations between the
// hyperparameters that the graph asserts. Real files, as the converter
// writes them, hold both. So the synthesizer's last stage builds the
// graphs of a context by the replay (internal/replay/arch), which refuses in Go
// what ggml and llama.cpp assert, and mends what it refuses:
//   - a null weight reaching an op: the optional tensors the loader
//     asked for, each tried in turn, are kept where the graph then gets
//     further;
//   - an architecture's hyperparameter relations: archSeeds, the keys
//     its converter writes for real models.

// graphConfigs are the contexts whose graphs are checked: llama.cpp's
// defaults with flash attention on and off, several sequences, a small
// ubatch.
var graphConfigs = []struct {
	name                    string
	fa                      int
	nSeq, nUBatch, nOutputs uint32
}{
	{"fa on", 1, 1, 512, 512},
	{"fa off", 0, 1, 512, 512},
	{"-np 4", 1, 4, 512, 512},
	{"generation", 1, 1, 1, 1},
}

// GraphError is a graph of the model that the replay refuses.
type GraphError struct {
	Arch   string
	Config string
	Err    error
}

func (e *GraphError) Error() string {
	return fmt.Sprintf("synth: %s: the %s graph: %v", e.Arch, e.Config, e.Err)
}

func (e *GraphError) Unwrap() error { return e.Err }

// checkGraph builds the model's graphs; the first refusal is returned.
// A construct the replay does not support is not the model's fault: it
// is returned as it is, and nothing is mended for it.
func (m *ArchModel) checkGraph(lib *ops.Lib) error {
	r, rec, err := m.load()
	if err != nil {
		return err
	}
	for _, c := range graphConfigs {
		cx, err := r.InitContext(arch.ContextParams{NBatch: 2048, NUBatch: c.nUBatch, NSeqMax: c.nSeq, FlashAttn: c.fa,
			TypeK: ggml.TypeF16, TypeV: ggml.TypeF16, OffloadKQV: true}, nil)
		if err != nil {
			var t *arch.Throw
			if errors.As(err, &t) {
				continue // llama.cpp refuses the context: no graph to build
			}
			return &GraphError{Arch: m.Arch, Config: c.name, Err: err}
		}
		mem, err := r.CreateMemory(cx.Memory())
		if err != nil {
			return &GraphError{Arch: m.Arch, Config: c.name, Err: err}
		}
		if ok, why := graph.Replayed(r, mem); !ok {
			return &GraphError{Arch: m.Arch, Config: c.name, Err: errors.New(why)}
		}
		nTok := min(c.nUBatch, cx.NUBatch)
		nSeq := min(cx.NSeqMax, nTok)
		g, err := graph.BuildGraph(r, graph.GraphParams{Lib: lib, NTokens: nTok, NSeqs: nSeq, NOutputs: min(c.nOutputs, nTok),
			FlashAttn: cx.FlashAttn, Memory: mem, NTensors: len(rec.created)})
		if err != nil {
			return &GraphError{Arch: m.Arch, Config: c.name, Err: err}
		}
		g.Free()
	}
	return nil
}

var nullWeight = regexp.MustCompile(`^null tensor passed to `)

// solveGraph mends the model until its graphs build, or says what stops
// them.
func (m *ArchModel) solveGraph(lib *ops.Lib) error {
	err := m.checkGraph(lib)
	for err != nil {
		var ab *arch.Abort
		if !errors.As(err, &ab) || !nullWeight.MatchString(ab.Msg) {
			return err
		}
		// a weight the graph reads is one the loader took as optional:
		// add every optional tensor it asks for, then take out again,
		// a kind at a time, those the graph gets as far without
		kinds, kerr := m.optionalKinds()
		if kerr != nil {
			return kerr
		}
		before := m.snapshot()
		var added []string
		for _, k := range kinds {
			if m.addOptional(k) {
				added = append(added, k)
			}
		}
		far := m.checkGraph(lib)
		if far != nil && far.Error() == err.Error() {
			m.restore(before)
			return err // no optional tensor is the one
		}
		for i := len(added) - 1; i >= 0; i-- {
			saved := m.snapshot()
			m.restore(before)
			for j, k := range added {
				if j != i {
					m.addOptional(k)
				}
			}
			if next := m.checkGraph(lib); sameOutcome(next, far) {
				added = append(added[:i], added[i+1:]...)
				continue
			}
			m.restore(saved)
		}
		for _, k := range added {
			m.Log = append(m.Log, "optional "+k+" (for the graph: "+ab.Msg+" in "+ab.Where+")")
		}
		err = far
	}
	return nil
}

func sameOutcome(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// optionalKinds are the optional tensors the loader asks for and the
// model lacks, by name with the layer number taken out, in the order
// asked.
func (m *ArchModel) optionalKinds() ([]string, error) {
	var kinds []string
	seen := map[string]bool{}
	err := m.eachOptional(func(n *arch.Need) {
		k := layerless(n.Tensor)
		if !seen[k] {
			seen[k] = true
			kinds = append(kinds, k)
		}
	})
	return kinds, err
}

// addOptional adds every optional tensor of kind k the loader asks for.
func (m *ArchModel) addOptional(k string) bool {
	var needs []*arch.Need
	if err := m.eachOptional(func(n *arch.Need) {
		if layerless(n.Tensor) == k && validShape(n.Shape) {
			needs = append(needs, n)
		}
	}); err != nil {
		return false
	}
	added := false
	for _, n := range needs {
		added = m.addTensor(n) || added
	}
	if !added {
		return false
	}
	// the tensors an added one replaces are no longer created
	return m.settle() == nil
}

// eachOptional calls fn on every optional tensor the loader asks for
// that the model lacks.
func (m *ArchModel) eachOptional(fn func(*arch.Need)) error {
	gm, err := m.Model(false)
	if err != nil {
		return err
	}
	r, err := arch.Load(gm, arch.Options{Optional: func(n *arch.Need) {
		if n.Tensor != "" {
			if _, ok := m.index[n.Tensor]; !ok {
				fn(n)
			}
		}
	}})
	if err == nil {
		err = r.CreateTensors(&recordPlacer{created: map[string]bool{}})
	}
	return err
}

// settle drops what the loader no longer creates and checks that it
// loads the model.
func (m *ArchModel) settle() error {
	_, rec, err := m.load()
	if err != nil && rec != nil && strings.Contains(err.Error(), "wrong number of tensors") && m.dropUncreated(rec.created) {
		return m.settle()
	}
	return err
}

// load replays llama.cpp's loading of the model: its hyperparameters and
// tensors (rec: the tensors it created, nil if it stopped before).
func (m *ArchModel) load() (*arch.Run, *recordPlacer, error) {
	gm, err := m.Model(false)
	if err != nil {
		return nil, nil, err
	}
	r, err := arch.Load(gm, arch.Options{})
	if err != nil {
		return nil, nil, err
	}
	rec := &recordPlacer{created: map[string]bool{}}
	return r, rec, r.CreateTensors(rec)
}

var layerNumber = regexp.MustCompile(`^((?:enc\.|dec\.)?)blk\.\d+\.`)

func layerless(name string) string { return layerNumber.ReplaceAllString(name, "${1}blk.N.") }

type archSnapshot struct {
	tensors []ArchTensor
	log     int
}

func (m *ArchModel) snapshot() archSnapshot {
	return archSnapshot{tensors: append([]ArchTensor(nil), m.Tensors...), log: len(m.Log)}
}

func (m *ArchModel) restore(s archSnapshot) {
	// a copy: the model's changes (dropUncreated filters in place) must
	// leave the snapshot as it was
	m.Tensors = append([]ArchTensor(nil), s.tensors...)
	m.Log = m.Log[:s.log]
	m.index = map[string]int{}
	for i, t := range m.Tensors {
		m.index[t.Name] = i
	}
}
