// Port of llama.cpp tools/server/server-context.cpp (the slot save,
// restore and erase tasks of process_single_task) and
// tools/server/server-common.cpp (server_tokens::serialize, deserialize)
// (v0.5.0).

package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"time"
)

// serverTokensVersion is SERVER_TOKENS_STATE_VERSION: the version of the
// token list a slot file holds.
const serverTokensVersion = 1

// SaveSlot saves slot id's prompt and memory to the file of that name in
// Params.SlotSavePath, in the pin's format (llama-server's slot files
// load here and these load in llama-server). A slot that is processing
// is saved once it is released.
func (e *Engine) SaveSlot(ctx context.Context, id int, filename string) (*SlotFile, error) {
	return e.slotFile(ctx, taskSlotSave, id, filename)
}

// RestoreSlot restores slot id's prompt and memory from the file.
func (e *Engine) RestoreSlot(ctx context.Context, id int, filename string) (*SlotFile, error) {
	return e.slotFile(ctx, taskSlotRestore, id, filename)
}

// EraseSlot forgets slot id's prompt and memory; the tokens it held.
func (e *Engine) EraseSlot(ctx context.Context, id int) (int, error) {
	t := e.newTask(taskSlotErase, nil, Options{})
	t.slotID = id
	v, err := e.await(ctx, t, nil)
	if err != nil {
		return 0, err
	}
	return v.(int), nil
}

func (e *Engine) slotFile(ctx context.Context, kind taskKind, id int, filename string) (*SlotFile, error) {
	if e.p.SlotSavePath == "" {
		return nil, errorf(ErrNotSupported, "This server does not support slots action. Start it with `--slot-save-path`")
	}
	if !validFilename(filename) {
		return nil, errorf(ErrInvalidRequest, "Invalid filename")
	}
	t := e.newTask(kind, nil, Options{})
	t.slotID, t.file = id, filename
	v, err := e.await(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	return v.(*SlotFile), nil
}

// validFilename refuses a name that is not one file's in the directory.
// (The HTTP layer applies fs_validate_filename's rules before this.)
func validFilename(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\\\x00") && filepath.Base(name) == name
}

// slotByID is get_slot_by_id: the id wraps around the slots.
func (e *Engine) slotByID(id int) *slot {
	if id < 0 {
		return nil
	}
	return e.slots[id%len(e.slots)]
}

// slotAction runs a save, restore or erase task.
func (e *Engine) slotAction(t *task) {
	s := e.slotByID(t.slotID)
	if s == nil {
		t.out.send(errorf(ErrInvalidRequest, "Invalid slot ID"))
		return
	}
	if s.processing() {
		e.deferTask(t)
		return
	}
	start := time.Now()
	path := filepath.Join(e.p.SlotSavePath, t.file)
	switch t.kind {
	case taskSlotSave:
		packed := serializeTokens(s.prompt.tokens)
		n, err := e.ctx.SaveSeqFile(path, int32(s.id), packed)
		if err != nil {
			t.out.send(errorf(ErrServer, "Unable to save slot"))
			return
		}
		t.out.send(&SlotFile{Slot: t.slotID, Filename: t.file, NTokens: len(s.prompt.tokens), NBytes: n, TimeMS: ms(start)})
	case taskSlotRestore:
		n, toks, err := e.restoreSlot(s, path)
		if err != nil {
			e.promptClear(s)
			t.out.send(errorf(ErrInvalidRequest, "Unable to restore slot: %v", err))
			return
		}
		s.prompt.clear()
		s.prompt.tokens = toks
		t.out.send(&SlotFile{Slot: t.slotID, Filename: t.file, NTokens: len(toks), NBytes: n, TimeMS: ms(start)})
	case taskSlotErase:
		n := len(s.prompt.tokens)
		e.promptClear(s)
		t.out.send(n)
	}
}

func ms(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// restoreSlot loads the file into the slot's sequence: the bytes read
// and its tokens, checked against the slot and the vocabulary.
func (e *Engine) restoreSlot(s *slot, path string) (int64, []int32, error) {
	packed, n, err := e.ctx.LoadSeqFile(path, int32(s.id), 1<<28)
	if err != nil {
		return 0, nil, errors.New("No available space in KV cache or invalid slot save file")
	}
	toks, err := deserializeTokens(packed)
	if err != nil {
		return 0, nil, err
	}
	if len(toks) > s.nCtx {
		return 0, nil, errors.New("Restored prompt does not fit in the slot context")
	}
	nVocab := int32(e.vocab.NTokens())
	for _, t := range toks {
		if t < 0 || t >= nVocab {
			return 0, nil, errors.New("Invalid tokens in slot save file")
		}
	}
	return n, toks, nil
}

// serializeTokens is server_tokens::serialize of text tokens: a null
// token, the version, the count and the tokens, and no media.
func serializeTokens(toks []int32) []int32 {
	out := make([]int32, 0, len(toks)+4)
	out = append(out, -1, serverTokensVersion, int32(len(toks)))
	out = append(out, toks...)
	return append(out, 0) // (no media chunks)
}

// deserializeTokens is server_tokens::deserialize without a projector: a
// plain token list (older files), or the format serializeTokens writes.
func deserializeTokens(packed []int32) ([]int32, error) {
	if len(packed) == 0 || packed[0] != -1 {
		return packed, nil
	}
	b := make([]byte, 4*len(packed))
	for i, t := range packed {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(t))
	}
	off := 4
	u32 := func() (uint32, error) {
		if off+4 > len(b) {
			return 0, errors.New("Unexpected end of server tokens state")
		}
		v := binary.LittleEndian.Uint32(b[off:])
		off += 4
		return v, nil
	}
	v, err := u32()
	if err != nil {
		return nil, err
	}
	if v != serverTokensVersion {
		return nil, errors.New("Unsupported server tokens state version")
	}
	n, err := u32()
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(len(b)-off)/4 {
		return nil, errors.New("Unexpected end of server tokens state")
	}
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(binary.LittleEndian.Uint32(b[off:]))
		off += 4
	}
	nMedia, err := u32()
	if err != nil {
		return nil, err
	}
	if nMedia != 0 {
		return nil, errors.New("Cannot restore media tokens without an mmproj")
	}
	if len(b)-off >= 4 {
		return nil, errors.New("Trailing data in server tokens state")
	}
	return toks, nil
}
