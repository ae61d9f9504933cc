package rpc_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
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

// emptyCaches removes the files of the hosts' caches (the servers keep
// running, their cache directories stay).
func emptyCaches(t *testing.T, hosts []testenv.NetHost) {
	t.Helper()
	for _, h := range hosts {
		if h.Cache == "" {
			continue
		}
		for _, f := range cacheFiles(t, h.Cache) {
			if err := os.Remove(filepath.Join(h.Cache, f[:strings.LastIndexByte(f, ':')])); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The guard's own sets against ggml's client (RPCOptions.NativeSets, as
// llama.cpp sends): onto servers with and without a file cache, the same
// model loaded four times (the first with no hash index, the second with
// the index the first left, the third with that index onto caches emptied
// meanwhile, the fourth without an index), each load sends exactly as many
// bytes as the native client does, the servers' caches end holding the
// same files, and every weight reads back equal to the file. The second
// and third loads hash nothing; on a server with a cache, the second reads
// and sends no tensor above the hash threshold, and the third sends each
// distinct one once (its copies, asked for after it, come from the cache).
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
			for round, dir := range []string{index, index, index, "off"} {
				if round == 2 {
					emptyCaches(t, c.hosts)
				}
				load := func(dev string) (uint64, loader.Stats) {
					d, _ := rt.DeviceByName(dev)
					if d.SendsRPC() == (dev == native) {
						t.Fatalf("%s: SendsRPC %v", dev, d.SendsRPC())
					}
					params := place.Params{}
					params.LoadMode = place.LoadNone
					params.DeviceNames = []string{dev}
					p, err := place.New(context.Background(), rt, m, params)
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
				if round == 1 || round == 2 {
					wantHashed = 0
				}
				if c.hosts[0].Cache != "" {
					wantCached = big
					if round == 0 || round == 2 {
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

// Split mode tensor over two servers: ggml's meta buffer sets a tensor
// split along dimension 0 one row at a time (a request per row and
// server), and one split along dimension 1 a server after the other; the
// guards send each server its slice whole, to both at once, instead
// (ggml.Tensor.SetSplit). Against the native client (RPCOptions.NativeSets)
// onto two other servers with file caches, three times (the guards' loads
// with a hash index; the third after the second server of each pair
// emptied its cache): every weight reads back equal to the file, the
// caches end holding the same files (the output matrix's halves, above
// the hash threshold, are asked of them first by their hash, as the
// client asks), and the guards send the same data with a request header
// per row fewer. The second load hashes nothing, and does not read the
// halves the caches set.
func TestSplitTensorSetsAsNativeClient(t *testing.T) {
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	rt := testenv.Runtime(t)
	hosts := testenv.NetHosts(t, 4, testenv.NetOptions{Cache: true})
	native := register(t, rt, hosts[:2], ggml.RPCOptions{NativeSets: true})
	own := register(t, rt, hosts[2:], ggml.RPCOptions{})
	// output.weight (32000 x 1024 q8_0, 33 MiB) is split along dimension
	// 1: each server's slice is one request above the threshold. It
	// follows the token embeddings, which the load reads, in the file:
	// read with readahead, they would bring in megabytes of it
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 2, Embd: 1024, FF: 2816, Heads: 8, Vocab: 32000})
	m := testenv.OpenModel(t, path)
	out, ok := m.Weight("output.weight")
	if !ok || out.Size <= 2*ggml.RPCHashThreshold {
		t.Fatalf("output.weight %v", out)
	}
	index := t.TempDir()
	// the matrices split along dimension 0 (attention output, feed-forward
	// down) go a row per request and server through the meta buffer: a
	// request header (message header, rpc_tensor, cache flag, offset) each
	var rowRequests uint64
	const rowRequest = 9 + 296 + 1 + 8
	for _, w := range m.Weights {
		if strings.HasSuffix(w.Name, "attn_output.weight") || strings.HasSuffix(w.Name, "ffn_down.weight") {
			rowRequests += 2 * uint64(w.Shape[1]-1)
		}
	}
	// load loads onto devs, with the hash index dir; cold, the model's
	// pages are dropped from the page cache first, and read is how much
	// of output.weight's the load brought back
	load := func(devs []string, dir string, cold bool) (sent uint64, st loader.Stats, read int64) {
		t.Helper()
		params := place.Params{SplitMode: place.SplitTensor, DeviceNames: devs, TensorSplit: []float32{1, 2}}
		params.LoadMode = place.LoadNone
		p, err := place.New(context.Background(), rt, m, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Devices) != 1 || !p.Devices[0].IsMeta() {
			t.Fatalf("devices %v", p.Devices)
		}
		var before uint64
		for _, name := range devs {
			d, _ := rt.DeviceByName(name)
			s, _ := d.RPCTraffic()
			before += s
		}
		if cold {
			testenv.Evict(t, path)
		}
		lm, err := loader.Load(context.Background(), p, loader.Options{HashIndex: dir})
		if err != nil {
			t.Fatalf("load onto %v: %v", devs, err)
		}
		defer lm.Close()
		read = -1
		if cold {
			read = testenv.Resident(t, path, out.Offset, out.Size)
		}
		if n := verify(t, lm)[p.Devices[0].Name()]; n == 0 {
			t.Fatalf("no tensor verified on %s", p.Devices[0].Name())
		}
		for _, name := range devs {
			d, _ := rt.DeviceByName(name)
			s, _ := d.RPCTraffic()
			sent += s
		}
		return sent - before, lm.Stats, read
	}
	var hashed uint64 // by the guards' first load: the slices they asked the caches for
	for round := range 3 {
		if round == 2 {
			// the second server of each pair forgets its slices
			emptyCaches(t, []testenv.NetHost{hosts[1], hosts[3]})
		}
		nativeSent, _, _ := load(native, "off", false)
		ownSent, st, read := load(own, index, round == 1)
		// a window of each slice read back from its server
		if st.Confirmed == 0 {
			t.Errorf("load %d: no tensor confirmed", round+1)
		}
		// the output matrix's halves: hashed to ask the caches, which
		// miss them the first time; the second time the hash index
		// knows them, and the caches set them before they are read; the
		// third, one cache emptied, both are asked by the index's
		// hashes, one is set by its cache, the other misses and is
		// sent for the cache to keep
		switch round {
		case 0:
			hashed = st.RPCHashed
			if hashed < 2*ggml.RPCHashThreshold || st.RPCCached != 0 {
				t.Errorf("first load: %d bytes hashed, %d set by the caches", st.RPCHashed, st.RPCCached)
			}
		case 2:
			kept := cacheBytes(t, hosts[2].Cache) // the first server's slice
			if st.RPCCached != kept || st.RPCHashed != 0 || kept == 0 || kept >= hashed {
				t.Errorf("third load: %d bytes set by the caches (the kept one holds %d), %d hashed", st.RPCCached, kept, st.RPCHashed)
			}
		default:
			if st.RPCCached != hashed || st.RPCHashed != 0 {
				t.Errorf("second load: %d bytes set by the caches, %d hashed; %d asked for the first time", st.RPCCached, st.RPCHashed, hashed)
			}
			// the confirmation's windows (64 bytes each, a few per
			// slice) and the identity's samples that fall in it (32
			// pages of the file, spread over it)
			t.Logf("second load, cold: %d of output.weight's %d bytes read", read, out.Size)
			if read > 256<<10 {
				t.Errorf("second load: %d of output.weight's %d bytes read, which the caches set", read, out.Size)
			}
		}
		t.Logf("load %d: native client sent %.2f MiB, guards %.2f MiB (%d row requests fewer)",
			round+1, float64(nativeSent)/(1<<20), float64(ownSent)/(1<<20), rowRequests)
		if ownSent+rowRequests*rowRequest*9/10 > nativeSent {
			t.Errorf("load %d: the guards sent %d bytes, the native client %d: not the %d requests of a row fewer", round+1, ownSent, nativeSent, rowRequests)
		}
		for i := range 2 {
			a, b := cacheFiles(t, hosts[i].Cache), cacheFiles(t, hosts[2+i].Cache)
			if !slices.Equal(a, b) || len(a) == 0 {
				t.Errorf("load %d, server %d: the native client's cache %v, the guards' %v", round+1, i, a, b)
			}
		}
	}
}

// A reload from a file out of the page cache onto a server whose file
// cache holds the weights above the hash threshold: the load reads the
// other tensors, and of the weights the cache sets, nothing but the pages
// of their confirmation windows and of the hash index's identity samples.
// Per layer the attention matrices (4.25 MiB each), which it reads, come
// before the feed-forward ones (12 MiB each) in the file, which it leaves:
// read with readahead, the first would bring in megabytes of the second
// (in either buffered load mode).
func TestCachedReloadLeavesCachedUnread(t *testing.T) {
	rt := testenv.Runtime(t)
	hosts := testenv.NetHosts(t, 1, testenv.NetOptions{Cache: true})
	dev := register(t, rt, hosts, ggml.RPCOptions{})[0]
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 2, Embd: 2048, FF: 5632, Heads: 16, Vocab: 32000, Tied: true})
	if testenv.Resident(t, path, 0, 1) < 0 {
		t.Skip("the page cache is not asked on this system")
	}
	m := testenv.OpenModel(t, path)
	index := t.TempDir()
	// the weights the cache sets: those above the threshold but the token
	// embeddings, which the load reads for the CPU too (the output
	// matrix, tied, is a copy of them on the server)
	var left []*gguf.Weight
	var leftBytes uint64
	for i := range m.Weights {
		w := &m.Weights[i]
		if w.Size > ggml.RPCHashThreshold && w.Name != "token_embd.weight" {
			left = append(left, w)
			leftBytes += uint64(w.Size)
		}
	}
	if len(left) < 6 {
		t.Fatalf("%d weights above the threshold", len(left))
	}
	// load loads in mode; then measures, before every weight is read
	// back and compared with the file
	load := func(mode place.LoadMode, then func(loader.Stats)) {
		t.Helper()
		params := place.Params{DeviceNames: []string{dev}}
		params.LoadMode = mode
		p, err := place.New(context.Background(), rt, m, params)
		if err != nil {
			t.Fatal(err)
		}
		lm, err := loader.Load(context.Background(), p, loader.Options{HashIndex: index})
		if err != nil {
			t.Fatal(err)
		}
		defer lm.Close()
		then(lm.Stats)
		if n := verify(t, lm)[dev]; n == 0 {
			t.Fatalf("no tensor verified on %s", dev)
		}
	}
	// the server's cache and the hash index learn the weights
	load(place.LoadNone, func(loader.Stats) {})
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		t.Run(mode.String(), func(t *testing.T) {
			testenv.Evict(t, path)
			load(mode, func(st loader.Stats) {
				if st.RPCCached < leftBytes || st.RPCHashed != 0 {
					t.Fatalf("%d bytes set by the cache (want %d at least), %d hashed", st.RPCCached, leftBytes, st.RPCHashed)
				}
				var read int64
				for _, w := range left {
					read += testenv.Resident(t, path, w.Offset, w.Size)
				}
				// a window of 64 bytes per weight (two pages at most),
				// and the identity's samples (the first 64 KiB, the last
				// 4 KiB, 32 pages)
				allowed := int64(len(left))*8<<10 + (64+4+32*4)<<10
				t.Logf("%d of the %d weights' %d bytes that the cache set came into the page cache (%d allowed)", read, len(left), leftBytes, allowed)
				if read > allowed {
					t.Errorf("%d bytes of the weights the cache set were read from the file, %d allowed", read, allowed)
				}
			})
		})
	}
}
