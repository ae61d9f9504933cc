package llama

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// stateLib is libllama's sequence state API.
type stateLib struct {
	SeqGetSize func(ctx uintptr, seq int32, flags uint32) uintptr                                                   `c:"llama_state_seq_get_size_ext"`
	SeqGetData func(ctx uintptr, dst unsafe.Pointer, size uintptr, seq int32, flags uint32) uintptr                 `c:"llama_state_seq_get_data_ext"`
	SeqSetData func(ctx uintptr, src unsafe.Pointer, size uintptr, seq int32, flags uint32) uintptr                 `c:"llama_state_seq_set_data_ext"`
	SeqSave    func(ctx uintptr, path string, seq int32, toks unsafe.Pointer, n uintptr) uintptr                    `c:"llama_state_seq_save_file"`
	SeqLoad    func(ctx uintptr, path string, seq int32, toks unsafe.Pointer, capacity uintptr, n *uintptr) uintptr `c:"llama_state_seq_load_file"`
	SeqPosMin  func(m uintptr, seq int32) int32                                                                     `c:"llama_memory_seq_pos_min"`
}

var (
	stateOnce sync.Once
	stateL    *stateLib
	stateErr  error
)

func (l *Lib) state() (*stateLib, error) {
	stateOnce.Do(func() {
		s := &stateLib{}
		if err := bindings.Bind(s, l.handle); err != nil {
			stateErr = err
			return
		}
		stateL = s
	})
	return stateL, stateErr
}

// SeqState is llama_state_seq_get_data_ext of the sequence: its bytes.
func (c *Context) SeqState(seq int32, flags uint32) ([]byte, error) {
	s, err := c.l.state()
	if err != nil {
		return nil, err
	}
	n := s.SeqGetSize(c.h, seq, flags)
	if n == 0 {
		return nil, fmt.Errorf("llama: llama_state_seq_get_size_ext(%d) is 0", seq)
	}
	buf := make([]byte, n)
	var pin runtime.Pinner
	pin.Pin(&buf[0])
	defer pin.Unpin()
	if got := s.SeqGetData(c.h, unsafe.Pointer(&buf[0]), n, seq, flags); got != n {
		return nil, fmt.Errorf("llama: llama_state_seq_get_data_ext wrote %d of %d bytes", got, n)
	}
	return buf, nil
}

// SetSeqState is llama_state_seq_set_data_ext: the bytes it read (0 where
// it failed, as libllama answers).
func (c *Context) SetSeqState(seq int32, data []byte, flags uint32) (int, error) {
	s, err := c.l.state()
	if err != nil {
		return 0, err
	}
	if len(data) == 0 {
		return 0, fmt.Errorf("llama: no state")
	}
	var pin runtime.Pinner
	pin.Pin(&data[0])
	defer pin.Unpin()
	return int(s.SeqSetData(c.h, unsafe.Pointer(&data[0]), uintptr(len(data)), seq, flags)), nil
}

// SaveSeqFile is llama_state_seq_save_file: the bytes written.
func (c *Context) SaveSeqFile(path string, seq int32, tokens []int32) (int, error) {
	s, err := c.l.state()
	if err != nil {
		return 0, err
	}
	var p unsafe.Pointer
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(tokens) > 0 {
		pin.Pin(&tokens[0])
		p = unsafe.Pointer(&tokens[0])
	}
	return int(s.SeqSave(c.h, path, seq, p, uintptr(len(tokens)))), nil
}

// LoadSeqFile is llama_state_seq_load_file with room for capacity
// tokens: the tokens and the bytes read (0 where it failed).
func (c *Context) LoadSeqFile(path string, seq int32, capacity int) ([]int32, int, error) {
	s, err := c.l.state()
	if err != nil {
		return nil, 0, err
	}
	toks := make([]int32, max(capacity, 1))
	var pin runtime.Pinner
	pin.Pin(&toks[0])
	defer pin.Unpin()
	var n uintptr
	got := s.SeqLoad(c.h, path, seq, unsafe.Pointer(&toks[0]), uintptr(capacity), &n)
	return toks[:n], int(got), nil
}

// SeqPosMin is llama_memory_seq_pos_min.
func (c *Context) SeqPosMin(seq int32) (int32, error) {
	s, err := c.l.state()
	if err != nil {
		return 0, err
	}
	d, err := c.l.decoder()
	if err != nil {
		return 0, err
	}
	return s.SeqPosMin(d.GetMemory(c.h), seq), nil
}
