// Port of llama.cpp src/llama-context.cpp (state_seq_get_size,
// state_seq_get_data, state_seq_set_data, state_seq_save_file,
// state_seq_load_file), src/llama-kv-cache.cpp (state_write, state_read),
// src/llama-kv-cache-iswa.cpp, src/llama-memory-recurrent.cpp,
// src/llama-memory-hybrid.cpp and src/llama-memory-hybrid-iswa.cpp
// (their state_write and state_read) (v0.5.0).

package infer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/graph"
)

// StateFlags are llama_state_seq_flags.
type StateFlags uint32

// StatePartialOnly is LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: of a memory of
// two parts (an iSWA cache, a hybrid), only the part that cannot be
// rolled back (the sliding-window cache, the recurrent state), as the
// server's context checkpoints save it.
const StatePartialOnly StateFlags = 1

// stateOnDevice is LLAMA_STATE_SEQ_FLAGS_ON_DEVICE, which ggload does not
// implement.
const stateOnDevice StateFlags = 2

// The state's magic numbers (llama-context.cpp's io_magic, llama.h's
// LLAMA_STATE_SEQ_MAGIC and LLAMA_STATE_SEQ_VERSION).
const (
	stateIOMagic     = 0xaf143cd8
	stateSeqMagic    = 0x67677371 // 'ggsq'
	stateSeqVersion  = 3
	stateFileHeader  = 3 * 4 // magic, version, token count
	maxStateFileToks = 1 << 28
)

// ErrState is wrapped by the errors of a sequence state that does not
// fit this context: another memory, other layers or types, no room, or
// bytes that end early.
var ErrState = errors.New("infer: the sequence state does not fit this context")

// SeqStateSize is llama_state_seq_get_size_ext: the bytes SeqState
// writes for the sequence.
func (c *Context) SeqStateSize(seq int32, flags StateFlags) (int, error) {
	if err := c.hold(); err != nil {
		return 0, err
	}
	defer c.mu.Unlock()
	w := &stateWriter{count: true}
	if err := c.seqStateWrite(w, seq, flags, true); err != nil {
		return 0, err
	}
	return w.n, nil
}

// SeqState is llama_state_seq_get_data_ext: the sequence's cells and
// their keys, values and states, as libllama writes them, byte for byte.
func (c *Context) SeqState(seq int32, flags StateFlags) ([]byte, error) {
	if err := c.hold(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	n := &stateWriter{count: true}
	if err := c.seqStateWrite(n, seq, flags, true); err != nil {
		return nil, err
	}
	w := &stateWriter{lib: c.lib, buf: make([]byte, 0, n.n)}
	if err := c.seqStateWrite(w, seq, flags, true); err != nil {
		return nil, err
	}
	return w.buf, nil
}

// SetSeqState is llama_state_seq_set_data_ext: the state SeqState wrote
// (here or by libllama) put back as sequence seq, in place of what seq
// held; the bytes it read. Where it fails, seq is left empty.
func (c *Context) SetSeqState(seq int32, data []byte, flags StateFlags) (int, error) {
	if err := c.hold(); err != nil {
		return 0, err
	}
	defer c.mu.Unlock()
	r := &stateReader{data: data}
	if magic := r.u32(); r.err == nil && magic != stateIOMagic {
		return 0, fmt.Errorf("%w: wrong sequence state magic %#x", ErrState, magic)
	}
	r.u32() // the sequence it was saved from
	if err := c.seqStateRead(r, seq, flags); err != nil {
		return 0, err
	}
	return r.off, nil
}

// SaveSeqFile is llama_state_seq_save_file: the sequence's state and the
// tokens it stands for written to path (a file there replaced whole, by
// a rename) in the pin's format (llama-server's slot files); the bytes
// written.
func (c *Context) SaveSeqFile(path string, seq int32, tokens []int32) (int64, error) {
	if err := c.hold(); err != nil {
		return 0, err
	}
	defer c.mu.Unlock()
	if len(tokens) > math.MaxUint32 {
		return 0, fmt.Errorf("infer: save %s: %d tokens", path, len(tokens))
	}
	n := &stateWriter{count: true}
	if err := c.seqStateWrite(n, seq, 0, false); err != nil {
		return 0, err
	}
	w := &stateWriter{lib: c.lib, buf: make([]byte, 0, stateFileHeader+4*len(tokens)+n.n)}
	w.u32(stateSeqMagic)
	w.u32(stateSeqVersion)
	w.u32(uint32(len(tokens)))
	for _, t := range tokens {
		w.u32(uint32(t))
	}
	if err := c.seqStateWrite(w, seq, 0, false); err != nil {
		return 0, err
	}
	if err := writeAtomic(path, w.buf); err != nil {
		return 0, fmt.Errorf("infer: save: %w", err)
	}
	return int64(len(w.buf)), nil
}

// writeAtomic writes data to a new file beside path and renames it to
// path: a file that was there is replaced whole or not at all.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// LoadSeqFile is llama_state_seq_load_file: a file SaveSeqFile (or
// llama-server's slot save) wrote, its state put back as sequence seq;
// its tokens (at most maxTokens) and the bytes read. Where the state
// fails to load, seq is left empty.
func (c *Context) LoadSeqFile(path string, seq int32, maxTokens int) ([]int32, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("infer: load: %w", err)
	}
	defer f.Close()
	var head [stateFileHeader]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return nil, 0, fmt.Errorf("infer: load %s: %w: not a sequence state file (%v)", path, ErrState, err)
	}
	magic, version, nTok := binary.LittleEndian.Uint32(head[0:]), binary.LittleEndian.Uint32(head[4:]), binary.LittleEndian.Uint32(head[8:])
	if magic != stateSeqMagic || version != stateSeqVersion {
		return nil, 0, fmt.Errorf("infer: load %s: %w: unknown (magic, version) for sequence state file: %08x, %08x", path, ErrState, magic, version)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("infer: load: %w", err)
	}
	rest := fi.Size() - stateFileHeader
	if int64(nTok) > rest/4 || nTok > maxStateFileToks {
		return nil, 0, fmt.Errorf("infer: load %s: %w: token count in sequence state file exceeds the file size! %d > %d", path, ErrState, nTok, rest/4)
	}
	if int(nTok) > maxTokens {
		return nil, 0, fmt.Errorf("infer: load %s: %w: token count in sequence state file exceeded capacity! %d > %d", path, ErrState, nTok, maxTokens)
	}
	data := make([]byte, rest)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, 0, fmt.Errorf("infer: load %s: %w", path, err)
	}
	toks := make([]int32, nTok)
	for i := range toks {
		toks[i] = int32(binary.LittleEndian.Uint32(data[4*i:]))
	}
	if err := c.hold(); err != nil {
		return nil, 0, err
	}
	defer c.mu.Unlock()
	r := &stateReader{data: data[4*int(nTok):]}
	if err := c.seqStateRead(r, seq, 0); err != nil {
		return nil, 0, fmt.Errorf("infer: load %s: %w", path, err)
	}
	return toks, int64(stateFileHeader + 4*int(nTok) + r.off), nil
}

// seqStateWrite is state_seq_get_data's (with the magic and the
// sequence, as the in-memory state has them) or state_seq_write_data's
// (a file's, without).
func (c *Context) seqStateWrite(w *stateWriter, seq int32, flags StateFlags, header bool) error {
	if err := c.stateSupported(seq, flags); err != nil {
		return err
	}
	if header {
		w.u32(stateIOMagic)
		w.u32(uint32(seq))
	}
	for _, p := range c.stateParts(flags&StatePartialOnly != 0) {
		if err := p.stateWrite(w, seq, c.lib); err != nil {
			return err
		}
	}
	return nil
}

// seqStateRead is state_seq_read_data into sequence seq.
func (c *Context) seqStateRead(r *stateReader, seq int32, flags StateFlags) error {
	if err := c.stateSupported(seq, flags); err != nil {
		return err
	}
	for _, p := range c.stateParts(flags&StatePartialOnly != 0) {
		if err := p.stateRead(r, seq, c.lib); err != nil {
			return err
		}
	}
	c.dropGraph()
	return nil
}

// statePart is one memory of a sequence's state: a KV cache or a
// recurrent state.
type statePart interface {
	stateWrite(w *stateWriter, seq int32, lib *ops.Lib) error
	stateRead(r *stateReader, seq int32, lib *ops.Lib) error
}

// stateParts are the memories a state holds, in the order the pin's
// memory modules write them: an iSWA pair's base cache (unless partial)
// then its sliding-window cache; a hybrid's KV cache (unless partial:
// llama_memory_hybrid; an iSWA pair's rule for llama_memory_hybrid_iswa)
// then its recurrent state.
func (c *Context) stateParts(partial bool) []statePart {
	mem := c.rep.Memory
	if mem == nil || len(mem.Caches) == 0 {
		return nil
	}
	var out []statePart
	switch mem.Class {
	case "llama_kv_cache":
		out = append(out, c.caches[0])
	case "llama_kv_cache_iswa", "llama_memory_hybrid_iswa":
		if !partial {
			out = append(out, c.caches[0])
		}
		out = append(out, c.caches[1])
	case "llama_memory_hybrid":
		if !partial {
			out = append(out, c.caches[0])
		}
	}
	if c.recr != nil {
		out = append(out, c.recr)
	}
	return out
}

// stateSupported refuses what the state's reads and writes do not
// cover: another sequence than one of the context's, the device flag,
// the memories whose state ggload does not save yet.
func (c *Context) stateSupported(seq int32, flags StateFlags) error {
	if seq < 0 || uint32(seq) >= c.nSeqMax {
		return fmt.Errorf("infer: sequence state: sequence %d of %d (the whole memory's state is not implemented)", seq, c.nSeqMax)
	}
	if flags&^StatePartialOnly != 0 {
		return fmt.Errorf("infer: sequence state: flags %#x (only LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY is implemented)", uint32(flags))
	}
	if mem := c.rep.Memory; mem != nil && len(mem.Caches) > 0 {
		switch mem.Class {
		case "llama_kv_cache", "llama_kv_cache_iswa", "llama_memory_recurrent", "llama_memory_hybrid", "llama_memory_hybrid_iswa":
		default:
			return fmt.Errorf("infer: sequence state: %s: the state of memory %s is not implemented by ggload", c.rep.Run.Arch, mem.Class)
		}
	}
	return nil
}

// stateWriter is llama_io_write_host (or, counting, llama_io_write_dummy).
type stateWriter struct {
	count bool
	n     int
	buf   []byte
	lib   *ops.Lib
}

func (w *stateWriter) u32(v uint32) {
	w.n += 4
	if !w.count {
		w.buf = binary.LittleEndian.AppendUint32(w.buf, v)
	}
}

func (w *stateWriter) u64(v uint64) {
	w.n += 8
	if !w.count {
		w.buf = binary.LittleEndian.AppendUint64(w.buf, v)
	}
}

// tensor writes size bytes of t from offset.
func (w *stateWriter) tensor(t *ops.Tensor, off, size uint64) {
	w.n += int(size)
	if w.count || size == 0 {
		return
	}
	at := len(w.buf)
	w.buf = append(w.buf, make([]byte, size)...)
	w.lib.TensorGet(t, w.buf[at:], uintptr(off))
}

// stateReader is llama_io_read_host: the reads from the bytes, the
// tensors' data set once everything has been read and checked.
type stateReader struct {
	data []byte
	off  int
	err  error
	sets []tensorSet
}

type tensorSet struct {
	t    *ops.Tensor
	off  uint64
	data []byte
}

func (r *stateReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.data)-r.off {
		r.err = fmt.Errorf("%w: unexpectedly reached end of buffer", ErrState)
		return nil
	}
	b := r.data[r.off : r.off+n]
	r.off += n
	return b
}

func (r *stateReader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *stateReader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// tensor queues size bytes into t at offset.
func (r *stateReader) tensor(t *ops.Tensor, off, size uint64) {
	if size > math.MaxInt32 {
		r.err = fmt.Errorf("%w: a tensor range of %d bytes", ErrState, size)
		return
	}
	if b := r.take(int(size)); b != nil && size > 0 {
		r.sets = append(r.sets, tensorSet{t, off, b})
	}
}

// flush sets the queued tensor data.
func (r *stateReader) flush(lib *ops.Lib) {
	for _, s := range r.sets {
		lib.TensorSet(s.t, s.data, uintptr(s.off))
	}
	r.sets = nil
}

// cellRange is a range of cells [lo, hi).
type cellRange struct{ lo, hi uint32 }

// stateRanges are the stream's cells a sequence's state holds (every
// cell of the sequence that its window still shows), in ranges.
func (c *kvCells) stateRanges(seq int32) ([]cellRange, uint32) {
	var out []cellRange
	n := uint32(0)
	begin := c.size()
	maxPos := c.seqPosMax(seq)
	for i := range c.size() {
		add := !c.isEmpty(i) && c.seq[i].has(seq)
		if add && c.nSWA > 0 && c.maskedSWA(c.pos[i], maxPos) {
			add = false
		}
		if add {
			n++
			if begin == c.size() {
				begin = i
			}
		} else if begin != c.size() {
			out = append(out, cellRange{begin, i})
			begin = c.size()
		}
	}
	if begin != c.size() {
		out = append(out, cellRange{begin, c.size()})
	}
	return out, n
}

// stateWrite is llama_kv_cache::state_write for one sequence.
func (kc *kvCache) stateWrite(w *stateWriter, seq int32, lib *ops.Lib) error {
	w.u32(uint32(len(kc.streams)))
	for s, cells := range kc.streams {
		ranges, n := cells.stateRanges(seq)
		w.u32(n)
		if n == 0 {
			continue
		}
		for _, rg := range ranges {
			for i := rg.lo; i < rg.hi; i++ {
				w.u32(uint32(cells.pos[i]))
				w.u32(1) // (the sequence alone)
				if kc.cellExt {
					w.u32(uint32(cells.extX[i]))
					w.u32(uint32(cells.extY[i]))
					w.u32(uint32(cells.tok[i]))
				}
				w.u32(uint32(seq))
			}
		}
		if err := kc.writeData(w, s, ranges, lib); err != nil {
			return err
		}
	}
	return nil
}

// writeData is llama_kv_cache::state_write_data: each layer's keys, then
// its values (rows of cells, or with V transposed, each row's elements).
func (kc *kvCache) writeData(w *stateWriter, s int, ranges []cellRange, lib *ops.Lib) error {
	w.u32(b2u32(kc.vTrans))
	w.u32(uint32(len(kc.layers)))
	for _, l := range kc.layers {
		row, err := lib.RowSize(l.k.Type, l.k.Ne[0])
		if err != nil {
			return err
		}
		w.u32(uint32(l.k.Type))
		w.u64(row)
		base := uint64(s) * uint64(l.k.Nb[2])
		for _, rg := range ranges {
			w.tensor(l.k, base+uint64(rg.lo)*row, uint64(rg.hi-rg.lo)*row)
		}
	}
	for _, l := range kc.layers {
		if l.v == nil {
			continue
		}
		base := uint64(s) * uint64(l.v.Nb[2])
		w.u32(uint32(l.v.Type))
		if !kc.vTrans {
			row, err := lib.RowSize(l.v.Type, l.nEmbV)
			if err != nil {
				return err
			}
			w.u64(row)
			for _, rg := range ranges {
				w.tensor(l.v, base+uint64(rg.lo)*row, uint64(rg.hi-rg.lo)*row)
			}
			continue
		}
		el := uint64(lib.TypeSize(l.v.Type))
		kvSize := uint64(kc.size())
		w.u32(uint32(el))
		w.u32(uint32(l.nEmbV))
		for j := range uint64(l.nEmbV) {
			for _, rg := range ranges {
				w.tensor(l.v, base+(uint64(rg.lo)+j*kvSize)*el, uint64(rg.hi-rg.lo)*el)
			}
		}
	}
	return nil
}

// stateRead is llama_kv_cache::state_read into sequence seq: the cells
// found as a ubatch of the saved positions finds them, then their data;
// where it fails, the sequence is removed.
func (kc *kvCache) stateRead(r *stateReader, seq int32, lib *ops.Lib) error {
	if n := r.u32(); r.err == nil && n != uint32(len(kc.streams)) {
		return fmt.Errorf("%w: n_stream mismatch (%d, the context's %d)", ErrState, n, len(kc.streams))
	}
	for range kc.streams {
		n := r.u32()
		if r.err != nil {
			return r.err
		}
		if n == 0 {
			continue
		}
		strm := kc.streamOf(seq)
		cells := kc.streams[strm]
		err := kc.readStream(r, strm, seq, n, lib)
		if err == nil {
			err = r.err
		}
		if err != nil {
			r.sets = nil
			cells.seqRm(seq, -1, -1)
			return fmt.Errorf("%w: failed to restore kv cache: %w", ErrState, err)
		}
		r.flush(lib)
	}
	return r.err
}

// readStream is state_read_meta and state_read_data for one stream of
// the sequence's n cells.
func (kc *kvCache) readStream(r *stateReader, strm int, seq int32, n uint32, lib *ops.Lib) error {
	cells := kc.streams[strm]
	cells.seqRm(seq, -1, -1)
	if n > cells.size() {
		return fmt.Errorf("not enough cells in kv cache to restore state (%d > %d)", n, cells.size())
	}
	pos := make([]int32, n)
	toks := make([]int32, n)
	seqs := make([][]int32, n)
	type ext struct{ x, y, tok int32 }
	var exts []ext
	for i := range n {
		pos[i] = int32(r.u32())
		if nSeq := r.u32(); r.err == nil && nSeq != 1 {
			return fmt.Errorf("invalid seq_id-agnostic kv cell")
		}
		if kc.cellExt {
			e := ext{int32(r.u32()), int32(r.u32()), int32(r.u32())}
			toks[i] = e.tok
			exts = append(exts, e)
		}
		r.u32() // (its sequence: seq takes it)
		seqs[i] = []int32{seq}
		if r.err != nil {
			return r.err
		}
	}
	idxs := cells.findSlot(n)
	if idxs == nil {
		return fmt.Errorf("failed to find %d available cells in kv cache", n)
	}
	cells.apply(idxs, pos, seqs, toks, kc.pos2d)
	for i, e := range exts {
		cells.extX[idxs[i]], cells.extY[idxs[i]], cells.tok[idxs[i]] = e.x, e.y, e.tok
	}
	return kc.readData(r, strm, idxs, lib)
}

// readData is llama_kv_cache::state_read_data: the keys and values into
// the cells idxs, in runs of consecutive cells.
func (kc *kvCache) readData(r *stateReader, strm int, idxs []uint32, lib *ops.Lib) error {
	var runs []cellRange
	for i := 0; i < len(idxs); {
		j := i + 1
		for j < len(idxs) && idxs[j] == idxs[j-1]+1 {
			j++
		}
		runs = append(runs, cellRange{idxs[i], idxs[j-1] + 1})
		i = j
	}
	vTrans, nLayer := r.u32(), r.u32()
	if r.err != nil {
		return r.err
	}
	if nLayer != uint32(len(kc.layers)) {
		return fmt.Errorf("mismatched layer count (%d instead of %d)", nLayer, len(kc.layers))
	}
	if (vTrans != 0) != kc.vTrans {
		return fmt.Errorf("incompatible V transposition")
	}
	for _, l := range kc.layers {
		row, err := lib.RowSize(l.k.Type, l.k.Ne[0])
		if err != nil {
			return err
		}
		if typ := int32(r.u32()); r.err == nil && typ != l.k.Type {
			return fmt.Errorf("mismatched key type (%d != %d, layer %d)", l.k.Type, typ, l.il)
		}
		if sz := r.u64(); r.err == nil && sz != row {
			return fmt.Errorf("mismatched key row size (%d != %d, layer %d)", row, sz, l.il)
		}
		for _, rg := range runs {
			r.tensor(l.k, uint64(strm)*uint64(l.k.Nb[2])+uint64(rg.lo)*row, uint64(rg.hi-rg.lo)*row)
		}
	}
	for _, l := range kc.layers {
		if l.v == nil {
			continue
		}
		if typ := int32(r.u32()); r.err == nil && typ != l.v.Type {
			return fmt.Errorf("mismatched value type (%d != %d, layer %d)", l.v.Type, typ, l.il)
		}
		base := uint64(strm) * uint64(l.v.Nb[2])
		if !kc.vTrans {
			row, err := lib.RowSize(l.v.Type, l.nEmbV)
			if err != nil {
				return err
			}
			if sz := r.u64(); r.err == nil && sz != row {
				return fmt.Errorf("mismatched value row size (%d != %d, layer %d)", row, sz, l.il)
			}
			for _, rg := range runs {
				r.tensor(l.v, base+uint64(rg.lo)*row, uint64(rg.hi-rg.lo)*row)
			}
			continue
		}
		el := uint64(lib.TypeSize(l.v.Type))
		if sz := r.u32(); r.err == nil && uint64(sz) != el {
			return fmt.Errorf("mismatched value element size (%d != %d, layer %d)", el, sz, l.il)
		}
		if ne := r.u32(); r.err == nil && int64(ne) != l.nEmbV {
			return fmt.Errorf("mismatched GQA embedding size (%d != %d, layer %d)", l.nEmbV, ne, l.il)
		}
		kvSize := uint64(kc.size())
		for j := range uint64(l.nEmbV) {
			for _, rg := range runs {
				r.tensor(l.v, base+(uint64(rg.lo)+j*kvSize)*el, uint64(rg.hi-rg.lo)*el)
			}
		}
	}
	return r.err
}

// setLayers keeps each layer's state tensors, by the memory's tensors.
func (r *recCache) setLayers(mc *arch.Cache, ts []*ops.Tensor) {
	n := mc.Layers
	r.r, r.s, r.p = make([]*ops.Tensor, n), make([]*ops.Tensor, n), make([]*ops.Tensor, n)
	for j, mt := range mc.Tensors {
		if mt.Layer < 0 || mt.Layer >= n {
			continue
		}
		switch mt.Role {
		case 'r':
			r.r[mt.Layer] = ts[j]
		case 's':
			r.s[mt.Layer] = ts[j]
		case 'p':
			r.p[mt.Layer] = ts[j]
		}
	}
}

// stateWrite is llama_memory_recurrent::state_write for one sequence:
// its cell, and the rows of its current state (with a rollback pending,
// the snapshot plane that holds it).
func (r *recCache) stateWrite(w *stateWriter, seq int32, lib *ops.Lib) error {
	size := uint32(len(r.cells))
	var cells, rows []cellRange
	n := uint32(0)
	begin := size
	for i := range size {
		c := &r.cells[i]
		if !c.has(seq) {
			if begin != size {
				cells = append(cells, cellRange{begin, i})
				begin = size
			}
			continue
		}
		n++
		id := i
		if c.src >= 0 {
			id = uint32(c.src)
		}
		if r.nRSSeq != 0 {
			id += r.rsIdx[seq] * size
		}
		if k := len(rows); k == 0 || rows[k-1].hi != id {
			rows = append(rows, cellRange{id, id + 1})
		} else {
			rows[k-1].hi++
		}
		if begin == size {
			begin = i
		}
	}
	if begin != size {
		cells = append(cells, cellRange{begin, size})
	}
	w.u32(n)
	for _, rg := range cells {
		for i := rg.lo; i < rg.hi; i++ {
			w.u32(uint32(r.cells[i].pos))
			w.u32(0) // (seq-agnostic)
		}
	}
	w.u32(0) // s_trans
	w.u32(uint32(len(r.r)))
	for il, t := range r.r {
		if t == nil {
			continue
		}
		row, err := lib.RowSize(t.Type, t.Ne[0])
		if err != nil {
			return err
		}
		w.u32(uint32(t.Type))
		w.u64(row)
		for _, rg := range rows {
			w.tensor(t, uint64(rg.lo)*row, uint64(rg.hi-rg.lo)*row)
		}
		if p := r.p[il]; p != nil {
			prow, err := lib.RowSize(p.Type, p.Ne[0])
			if err != nil {
				return err
			}
			w.u64(prow)
			for _, rg := range rows {
				w.tensor(p, uint64(rg.lo)*prow, uint64(rg.hi-rg.lo)*prow)
			}
		}
	}
	for _, t := range r.s {
		if t == nil {
			continue
		}
		row, err := lib.RowSize(t.Type, t.Ne[0])
		if err != nil {
			return err
		}
		w.u32(uint32(t.Type))
		w.u64(row)
		for _, rg := range rows {
			w.tensor(t, uint64(rg.lo)*row, uint64(rg.hi-rg.lo)*row)
		}
	}
	return nil
}

// stateRead is llama_memory_recurrent::state_read into sequence seq:
// the cell found as a ubatch of the saved position finds it, its state
// set; where it fails, the sequence is removed.
func (r *recCache) stateRead(rd *stateReader, seq int32, lib *ops.Lib) error {
	n := rd.u32()
	if rd.err != nil {
		return rd.err
	}
	err := r.readMeta(rd, seq, n)
	if err == nil {
		err = r.readData(rd, n, lib)
	}
	if err == nil {
		err = rd.err
	}
	if err != nil {
		rd.sets = nil
		r.seqRm(seq, -1, -1)
		return fmt.Errorf("%w: failed to restore recurrent state: %w", ErrState, err)
	}
	rd.flush(lib)
	if r.nRSSeq != 0 {
		r.rsIdx[seq] = 0
	}
	return nil
}

func (r *recCache) readMeta(rd *stateReader, seq int32, n uint32) error {
	if err := r.seqRm(seq, -1, -1); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if n > uint32(len(r.cells)) {
		return fmt.Errorf("not enough cells in kv cache to restore state (%d > %d)", n, len(r.cells))
	}
	pos := make([]int32, n)
	seqs := make([][]int32, n)
	for i := range pos {
		pos[i] = int32(rd.u32())
		if k := rd.u32(); rd.err == nil && k != 0 {
			return fmt.Errorf("invalid seq_id-agnostic kv cell")
		}
		seqs[i] = []int32{seq}
	}
	if rd.err != nil {
		return rd.err
	}
	u := &ubatch{Ubatch: &graph.Ubatch{Tokens: make([]int32, n), Pos: pos, SeqIDs: seqs, Output: make([]bool, n), NSeqs: 1, Equal: true}}
	if err := r.findSlot(u); err != nil {
		return fmt.Errorf("failed to find available cells in kv cache: %w", err)
	}
	for i := range n {
		id := r.head + i
		r.cells[id].src = int32(id)
	}
	return nil
}

func (r *recCache) readData(rd *stateReader, n uint32, lib *ops.Lib) error {
	sTrans, nLayer := rd.u32(), rd.u32()
	if rd.err != nil {
		return rd.err
	}
	if nLayer != uint32(len(r.r)) {
		return fmt.Errorf("mismatched layer count (%d instead of %d)", nLayer, len(r.r))
	}
	if n > uint32(len(r.cells)) {
		return fmt.Errorf("not enough cells in kv cache to restore state (%d > %d)", n, len(r.cells))
	}
	if sTrans != 0 {
		return fmt.Errorf("incompatible s transposition")
	}
	read := func(t *ops.Tensor, what string, il int, typed bool) error {
		row, err := lib.RowSize(t.Type, t.Ne[0])
		if err != nil {
			return err
		}
		if typed {
			if typ := int32(rd.u32()); rd.err == nil && typ != t.Type {
				return fmt.Errorf("mismatched %s type (%d != %d, layer %d)", what, t.Type, typ, il)
			}
		}
		if sz := rd.u64(); rd.err == nil && sz != row {
			return fmt.Errorf("mismatched %s row size (%d != %d, layer %d)", what, row, sz, il)
		}
		if n > 0 {
			rd.tensor(t, uint64(r.head)*row, uint64(n)*row)
		}
		return rd.err
	}
	for il, t := range r.r {
		if t == nil {
			continue
		}
		if err := read(t, "r", il, true); err != nil {
			return err
		}
		if p := r.p[il]; p != nil {
			if err := read(p, "ple", il, false); err != nil {
				return err
			}
		}
	}
	for il, t := range r.s {
		if t == nil {
			continue
		}
		if err := read(t, "s", il, true); err != nil {
			return err
		}
	}
	return nil
}

func b2u32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
