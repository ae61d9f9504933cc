package rpc_test

import (
	"context"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// BenchmarkRPCLoad loads a 256 MiB model onto one RPC host behind a link
// limited to 1 and 10 Gbit/s, through ggload's guard and directly as
// llama.cpp does; of-limit is the rate of weight bytes over the load's time
// as a fraction of the limit.
func BenchmarkRPCLoad(b *testing.B) {
	rt := testenv.Runtime(b)
	m := writeModel(b, rt, synth.BenchSpec(256<<20, ggml.TypeQ8_0))
	for _, rate := range []struct {
		name string
		bits float64
	}{{"1gbit", 1e9}, {"10gbit", 10e9}} {
		for _, direct := range []bool{false, true} {
			name := rate.name + "/guarded"
			if direct {
				name = rate.name + "/direct"
			}
			b.Run(name, func(b *testing.B) {
				hosts := testenv.NetHosts(b, 1, testenv.NetOptions{Rate: rate.name})
				rpc := register(b, rt, hosts, ggml.RPCOptions{Direct: direct})
				d, _ := rt.DeviceByName(rpc[0])
				for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
					b.Run(mode.String(), func(b *testing.B) {
						params := place.Params{}
						params.LoadMode, params.DeviceNames = mode, rpc
						p, err := place.New(context.Background(), rt, m, params)
						if err != nil {
							b.Fatal(err)
						}
						var placed int64
						for _, tp := range p.Tensors {
							if tp.Device == d && tp.Context >= 0 && !tp.Shared {
								placed += tp.Bytes
							}
						}
						b.SetBytes(placed)
						for b.Loop() {
							lm, err := loader.Load(context.Background(), p, loader.Options{})
							if err != nil {
								b.Fatal(err)
							}
							lm.Close()
						}
						b.ReportMetric(float64(placed)*8*float64(b.N)/b.Elapsed().Seconds()/rate.bits, "of-limit")
					})
				}
			})
		}
	}
}
