package rpcrelay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"github.com/ggload/ggload/ggml/gtype"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The guard's reply path against a fake server that answers whatever the
// fuzzer gives it, and a fake client that speaks as ggml's native client
// does (the same commands in the same order, reading exactly the reply
// size it expects). Whatever the server says:
//
//   - every reply the client gets has the size the client expects and
//     nothing the native client would abort on or misuse: protocol 7.0 in
//     the handshake, the registered device count, a power-of-two
//     alignment, a buffer at least as big as asked, an aligned non-null
//     base, an allocation size no smaller than the tensor, 0 or 1 results;
//   - the guard never hangs (every step has a deadline) and never
//     allocates what the server asks (the fuzzer gives reply sizes up to
//     2^64);
//   - a reply the client gets differs from the server's only when the guard
//     has declared the server failed (ErrFailed naming the endpoint and
//     a command), and without such an error every reply is the server's
//     (a buffer's base is asked twice by the guard, and must come back the
//     same).

// rpcStep is one command of the fake client.
type rpcStep struct {
	cmd  byte
	req  func(st *rpcFuzzState) []byte
	rsp  int                                       // reply size (-2: the size the request asks for)
	next func(st *rpcFuzzState, rsp []byte) string // checks the reply as the native client would; "" if fine
}

type rpcFuzzState struct {
	align uint64
	buf   uint64 // the buffer handle, 0 if none
	size  uint64 // its size
	base  uint64
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// rpcFuzzTensor packs a q4_K tensor of 768 × 2 in the buffer (ne0 not a
// multiple of 512, as the client asks GET_ALLOC_SIZE for).
func rpcFuzzTensor(st *rpcFuzzState) []byte {
	t := make([]byte, TensorSize)
	binary.LittleEndian.PutUint32(t[TensorType:], uint32(gtype.TypeQ4_K))
	binary.LittleEndian.PutUint64(t[TensorBuffer:], st.buf)
	ne := []uint32{768, 2, 1, 1}
	row := uint32(768 / 256 * 144)
	nb := []uint32{144, row, 2 * row, 2 * row}
	for i := range 4 {
		binary.LittleEndian.PutUint32(t[TensorNe+4*i:], ne[i])
		binary.LittleEndian.PutUint32(t[TensorNb+4*i:], nb[i])
	}
	binary.LittleEndian.PutUint64(t[220:], st.base) // data
	return t
}

const rpcFuzzTensorBytes = 2 * 768 / 256 * 144

var rpcFuzzScript = []rpcStep{
	{CmdHello, func(*rpcFuzzState) []byte { return make([]byte, ConnCapsSize) }, 4 + ConnCapsSize, func(_ *rpcFuzzState, r []byte) string {
		if r[0] != ProtoMajor || r[1] != ProtoMinor {
			return "a handshake of another protocol"
		}
		return ""
	}},
	{CmdDevCount, func(*rpcFuzzState) []byte { return nil }, 4, func(_ *rpcFuzzState, r []byte) string {
		if binary.LittleEndian.Uint32(r) != 1 {
			return "another device count"
		}
		return ""
	}},
	{CmdGetAlignment, func(*rpcFuzzState) []byte { return le32(0) }, 8, func(st *rpcFuzzState, r []byte) string {
		a := binary.LittleEndian.Uint64(r)
		if a == 0 || a&(a-1) != 0 {
			return "an alignment that is not a power of two"
		}
		st.align = a
		return ""
	}},
	{CmdGetMaxSize, func(*rpcFuzzState) []byte { return le32(0) }, 8, func(st *rpcFuzzState, r []byte) string {
		if binary.LittleEndian.Uint64(r) == 0 {
			return "a zero maximum size"
		}
		return ""
	}},
	{CmdGetDeviceMem, func(*rpcFuzzState) []byte { return le32(0) }, 16, nil},
	{CmdGetAllocSize, func(st *rpcFuzzState) []byte {
		req := append(le32(0), rpcFuzzTensor(st)...)
		return append(req, make([]byte, 10*TensorSize)...)
	}, 8, func(_ *rpcFuzzState, r []byte) string {
		if v := binary.LittleEndian.Uint64(r); v < rpcFuzzTensorBytes || v > 1<<40 {
			return "an allocation size below the tensor's bytes or absurdly large"
		}
		return ""
	}},
	{CmdAllocBuffer, func(*rpcFuzzState) []byte { return append(le32(0), le64(1<<20)...) }, 16, func(st *rpcFuzzState, r []byte) string {
		h, size := binary.LittleEndian.Uint64(r), binary.LittleEndian.Uint64(r[8:])
		if h != 0 && size < 1<<20 {
			return "a buffer smaller than asked"
		}
		st.buf, st.size = h, size
		return ""
	}},
	{CmdBufferGetBase, func(st *rpcFuzzState) []byte { return le64(st.buf) }, 8, func(st *rpcFuzzState, r []byte) string {
		b := binary.LittleEndian.Uint64(r)
		if b == 0 || (st.align != 0 && b%st.align != 0) {
			return "a null or unaligned base"
		}
		st.base = b
		return ""
	}},
	{CmdSetTensor, func(st *rpcFuzzState) []byte {
		req := append(rpcFuzzTensor(st), 0)
		req = append(req, le64(0)...)
		return append(req, make([]byte, rpcFuzzTensorBytes)...)
	}, -1, nil},
	{CmdSetTensorHash, func(st *rpcFuzzState) []byte {
		return append(append(rpcFuzzTensor(st), le64(0)...), le64(0x1234)...)
	}, 1, func(_ *rpcFuzzState, r []byte) string {
		if r[0] > 1 {
			return "a result other than 0 or 1"
		}
		return ""
	}},
	{CmdGetTensor, func(st *rpcFuzzState) []byte {
		return append(append(rpcFuzzTensor(st), le64(0)...), le64(64)...)
	}, -2, nil},
	{CmdGetTensor, func(st *rpcFuzzState) []byte { // streamed (over 4096 bytes)
		return append(append(rpcFuzzTensor(st), le64(0)...), le64(8192)...)
	}, -2, nil},
	{CmdCopyTensor, func(st *rpcFuzzState) []byte { return append(rpcFuzzTensor(st), rpcFuzzTensor(st)...) }, 1, func(_ *rpcFuzzState, r []byte) string {
		if r[0] > 1 {
			return "a result other than 0 or 1"
		}
		return ""
	}},
	{CmdBufferClear, func(st *rpcFuzzState) []byte { return append(le64(st.buf), 0) }, -1, nil},
	{CmdAllocBuffer, func(*rpcFuzzState) []byte { return append(le32(0), le64(4096)...) }, 16, func(st *rpcFuzzState, r []byte) string {
		if h := binary.LittleEndian.Uint64(r); h != 0 && binary.LittleEndian.Uint64(r[8:]) < 4096 {
			return "a buffer smaller than asked"
		}
		return ""
	}},
	{CmdFreeBuffer, func(st *rpcFuzzState) []byte { return le64(st.buf) }, -1, nil},
	{CmdGetDeviceMem, func(*rpcFuzzState) []byte { return le32(0) }, 16, nil},
}

// rpcGoodReplies is what an honest server answers the script.
func rpcGoodReplies() []byte {
	var out []byte
	add := func(p []byte) {
		out = binary.LittleEndian.AppendUint64(out, uint64(len(p)))
		out = append(out, p...)
	}
	add(append([]byte{ProtoMajor, ProtoMinor, 0, 0}, make([]byte, ConnCapsSize)...))
	add(le32(1))
	add(le64(64))
	add(le64(1 << 40))
	add(append(le64(3<<30), le64(4<<30)...))
	add(le64(rpcFuzzTensorBytes + 144))
	add(append(le64(0x55aa0010), le64(1<<20)...))
	add(le64(0x7f0000001000))
	add(le64(0x7f0000001000)) // the guard asks for a base twice
	add([]byte{0})
	add(bytes.Repeat([]byte{7}, 64))
	add(bytes.Repeat([]byte{9}, 8192))
	add([]byte{1})
	add(append(le64(0x55aa0020), le64(4096)...))
	add(append(le64(3<<30), le64(4<<30)...))
	return out
}

func FuzzRPCGuardReplies(f *testing.F) {
	good := rpcGoodReplies()
	f.Add(good)
	f.Add(good[:100])
	f.Add(good[:len(good)-5])
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 0xff
	f.Add(bad)
	huge := bytes.Clone(good)
	binary.LittleEndian.PutUint64(huge[36:], 1<<63) // the device count reply's size
	f.Add(huge)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, replies []byte) {
		rpcFuzzOne(t, replies)
	})
}

// TestRPCGuardHonestServer: the script against the honest replies goes
// through untouched and the guard reports nothing (the fuzz target's
// positive control); with one reply broken the guard reports it.
func TestRPCGuardHonestServer(t *testing.T) {
	if got := rpcFuzzOne(t, rpcGoodReplies()); got != nil {
		t.Fatalf("an honest server made the guard fail: %v", got)
	}
	bad := rpcGoodReplies()
	binary.LittleEndian.PutUint64(bad[56:], 48) // alignment 48
	got := rpcFuzzOne(t, bad)
	if !errors.Is(got, ErrFailed) || !strings.Contains(got.Error(), "GET_ALIGNMENT") {
		t.Fatalf("an alignment of 48 went through: %v", got)
	}
}

// rpcFuzzOne runs the script through a guard against a server answering
// replies, checks what the client gets, and returns the guard's error.
func rpcFuzzOne(t *testing.T, replies []byte) error {
	wd := time.AfterFunc(15*time.Second, func() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		panic("WATCHDOG\n" + string(buf[:n]))
	})
	defer wd.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// take every request, answer with the whole stream at once
		drained := make(chan struct{})
		go func() { io.Copy(io.Discard, c); close(drained) }()
		c.Write(replies)
		c.(*net.TCPConn).CloseWrite()
		<-drained
	}()
	g, c := clientThrough(t, ln.Addr().String())
	// what the server said, reply by reply, as an honest parse
	var said [][]byte
	for rest := replies; len(rest) >= 8; {
		n := binary.LittleEndian.Uint64(rest)
		if n > uint64(len(rest)-8) {
			break
		}
		said = append(said, rest[8:8+n])
		rest = rest[8+n:]
	}
	st := &rpcFuzzState{}
	changed := false
	replyNo := 0
	for i, s := range rpcFuzzScript {
		if s.cmd == CmdBufferGetBase || s.cmd == CmdSetTensor || s.cmd == CmdSetTensorHash || s.cmd == CmdGetTensor ||
			s.cmd == CmdCopyTensor || s.cmd == CmdBufferClear || s.cmd == CmdFreeBuffer {
			if st.buf == 0 {
				continue // the native client has no buffer: it would not ask
			}
		}
		req := s.req(st)
		msg := append([]byte{s.cmd}, le64(uint64(len(req)))...)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(append(msg, req...)); err != nil {
			t.Fatalf("step %d (%s): the guard took no request: %v", i, CmdName(s.cmd), err)
		}
		if s.rsp == -1 {
			continue
		}
		want := uint64(s.rsp)
		if s.rsp == -2 {
			want = binary.LittleEndian.Uint64(req[len(req)-8:])
		}
		var rh [8]byte
		if _, err := io.ReadFull(c, rh[:]); err != nil {
			t.Fatalf("step %d (%s): no reply from the guard: %v", i, CmdName(s.cmd), err)
		}
		if n := binary.LittleEndian.Uint64(rh[:]); n != want {
			t.Fatalf("step %d (%s): a reply of %d bytes where the client reads %d (it would abort)", i, CmdName(s.cmd), n, want)
		}
		rsp := make([]byte, want)
		if _, err := io.ReadFull(c, rsp); err != nil {
			t.Fatalf("step %d (%s): the reply was cut short: %v", i, CmdName(s.cmd), err)
		}
		if s.next != nil {
			if why := s.next(st, rsp); why != "" {
				t.Fatalf("step %d (%s): the client was given %s: % x", i, CmdName(s.cmd), why, rsp)
			}
		}
		server := []byte(nil)
		if replyNo < len(said) {
			server = said[replyNo]
		}
		if s.cmd == CmdHello && len(server) == len(rsp) {
			server = append(bytes.Clone(server[:4]), make([]byte, ConnCapsSize)...)
		}
		if !bytes.Equal(rsp, server) {
			changed = true
		}
		replyNo++
		if s.cmd == CmdBufferGetBase {
			replyNo++ // the guard's own second question
		}
	}
	c.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("the guard kept its server connection after the client left")
	}
	gerr := g.Err()
	if changed && gerr == nil {
		t.Fatal("the client got replies the server did not give, and the guard reports nothing")
	}
	if gerr != nil {
		if !errors.Is(gerr, ErrFailed) || !strings.Contains(gerr.Error(), g.remote) {
			t.Fatalf("the guard's error does not wrap ErrFailed naming %s: %v", g.remote, gerr)
		}
		named := false
		for cmd := range byte(CmdCount) {
			named = named || strings.Contains(gerr.Error(), CmdName(cmd))
		}
		if !named {
			t.Fatalf("the guard's error names no command: %v", gerr)
		}
	}
	return gerr
}
