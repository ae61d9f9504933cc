package rpc_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/synth"
	"github.com/ggload/ggload/internal/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// cacheFiles lists a server's file cache: each file's path under dir and
// size.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel+":"+strconv.FormatInt(info.Size(), 10))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// cacheBytes is the bytes of a server's file cache.
func cacheBytes(t *testing.T, dir string) uint64 {
	var n uint64
	for _, f := range cacheFiles(t, dir) {
		v, _ := strconv.ParseUint(f[strings.LastIndexByte(f, ':')+1:], 10, 64)
		n += v
	}
	return n
}

// The guard's own sets against ggml's client (RPCOptions.NativeSets, as
// llama.cpp sends): onto servers with and without a file cache, the same
// model loaded three times (the first with no hash index, the second with
// the index the first left, the third without an index), each load sends
// exactly as many bytes as the native client does, the servers' caches end
// holding the same files, and every weight reads back equal to the file.
// The second load hashes nothing; on a server with a cache, it reads and
// sends no tensor above the hash threshold.
func TestGuardSetsAsNativeClient(t *testing.T) {
	rt := testenv.Runtime(t)
	withCache := testenv.NetHosts(t, 2, testenv.NetOptions{Cache: true})
	without := testenv.NetHosts(t, 2, testenv.NetOptions{})
	// the token embedding (69 MB) and the feed-forward matrices (12 MB)
	// are over the 10 MiB threshold; the rest are not. The generator's
	// layers repeat their bytes: the second copy of a matrix is asked
	// for after the first was sent, and the cache has it.
	m := writeModel(t, rt, synth.Spec{Layers: 3, Embd: 2048, FF: 5632, Heads: 16, Vocab: 32000, Tied: true})
	var big uint64
	bigs := 0
	for _, w := range m.Weights {
		if w.Size > ggml.RPCHashThreshold {
			big += uint64(w.Size)
			bigs++
		}
	}
	for _, c := range []struct {
		name  string
		hosts []testenv.NetHost
	}{{"cache", withCache}, {"no-cache", without}} {
		t.Run(c.name, func(t *testing.T) {
			native := register(t, rt, c.hosts[:1], ggml.RPCOptions{NativeSets: true})[0]
			own := register(t, rt, c.hosts[1:], ggml.RPCOptions{})[0]
			index := t.TempDir()
			for round, dir := range []string{index, index, "off"} {
				load := func(dev string) (uint64, loader.Stats) {
					d, _ := rt.DeviceByName(dev)
					if d.SendsRPC() == (dev == native) {
						t.Fatalf("%s: SendsRPC %v", dev, d.SendsRPC())
					}
					params := place.Params{}
					params.LoadMode = place.LoadNone
					params.Devices = []string{dev}
					p, err := place.New(rt, m, params)
					if err != nil {
						t.Fatal(err)
					}
					s0, _ := d.RPCTraffic()
					lm, err := loader.Load(context.Background(), p, loader.Options{HashIndex: dir})
					if err != nil {
						t.Fatalf("load %d onto %s: %v", round+1, dev, err)
					}
					defer lm.Close()
					if n := verify(t, lm)[dev]; n == 0 {
						t.Fatalf("load %d onto %s: no tensor verified", round+1, dev)
					}
					s1, _ := d.RPCTraffic()
					return s1 - s0, lm.Stats
				}
				nativeSent, _ := load(native)
				ownSent, st := load(own)
				t.Logf("load %d (index %s): native client sent %.1f MiB, guard %.1f MiB; %.1f MiB hashed, %.1f MiB from the server's cache",
					round+1, filepath.Base(dir), float64(nativeSent)/(1<<20), float64(ownSent)/(1<<20), float64(st.RPCHashed)/(1<<20), float64(st.RPCCached)/(1<<20))
				if ownSent != nativeSent {
					t.Errorf("load %d: the guard sent %d bytes, the native client %d", round+1, ownSent, nativeSent)
				}
				wantHashed, wantCached := big, uint64(0)
				if round == 1 {
					wantHashed = 0
				}
				if c.hosts[0].Cache != "" {
					wantCached = big
					if round == 0 {
						// a copy of bytes sent before: the cache has it
						// (it holds each distinct tensor once)
						wantCached -= cacheBytes(t, c.hosts[1].Cache)
					}
				}
				if st.RPCHashed != wantHashed || st.RPCCached != wantCached {
					t.Errorf("load %d: %d bytes hashed, %d from the cache; want %d, %d", round+1, st.RPCHashed, st.RPCCached, wantHashed, wantCached)
				}
				if c.hosts[0].Cache != "" {
					a, b := cacheFiles(t, c.hosts[0].Cache), cacheFiles(t, c.hosts[1].Cache)
					if !slices.Equal(a, b) || len(a) == 0 {
						t.Errorf("load %d: the native client's server caches %v, the guard's %v", round+1, a, b)
					}
					if round == 0 {
						t.Logf("%d files in the cache for %d tensors above the threshold", len(a), bigs)
					}
				}
			}
		})
	}
}
