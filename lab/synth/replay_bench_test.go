package synth

import (
	"testing"

	"github.com/ggload/ggload/internal/replay/arch"
)

type nopPlacer struct{}

func (nopPlacer) Place(*arch.Creation) error { return nil }

// The replay of llama.cpp's hyperparameter and tensor creation programs
// for 1000-layer models (the planner's share of place.New).
//
//	go test -run XXX -bench Replay1000Layers ./lab/synth
func BenchmarkReplay1000Layers(b *testing.B) {
	vf, err := Vocab(1000)
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range []string{"llama", "glm4moe", "gemma3n", "t5", "rwkv7", "qwen4exp"} {
		b.Run(a, func(b *testing.B) {
			m, err := NewArchModel(a, vf, ArchOptions{Layers: 1000})
			if err != nil {
				b.Fatal(err)
			}
			gm, err := m.Model(false)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(gm.Weights)), "tensors")
			for b.Loop() {
				r, err := arch.Load(gm, arch.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := r.CreateTensors(nopPlacer{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
