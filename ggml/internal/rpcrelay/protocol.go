// Port of llama.cpp ggml/src/ggml-rpc/ggml-rpc.cpp and
// ggml/include/ggml-rpc.h (v0.5.0): the RPC protocol.

// Package rpcrelay speaks ggml's RPC protocol, as the pinned ggml-rpc
// defines it (its commands, the packed rpc_tensor, the size of every
// reply; a test holds them to the pin's source), and relays it: the Guard
// stands between ggml's native RPC client and one server and checks every
// reply before the client sees it (relay.go).
package rpcrelay

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/ggload/ggload/ggml/gtype"
)

// The protocol version the pin speaks (RPC_PROTO_*_VERSION).
const (
	ProtoMajor = 7
	ProtoMinor = 0
	ProtoPatch = 0
)

// ConnCapsSize is the size of HELLO's connection capabilities
// (RPC_CONN_CAPS_SIZE).
const ConnCapsSize = 24

// The commands of protocol 7 and the size of their replies (-1: none;
// -2: the size the request asks for, GET_TENSOR).
const (
	CmdAllocBuffer    = 0
	CmdGetAlignment   = 1
	CmdGetMaxSize     = 2
	CmdBufferGetBase  = 3
	CmdFreeBuffer     = 4
	CmdBufferClear    = 5
	CmdSetTensor      = 6
	CmdSetTensorHash  = 7
	CmdGetTensor      = 8
	CmdCopyTensor     = 9
	CmdGraphCompute   = 10
	CmdGetDeviceMem   = 11
	CmdInitTensor     = 12
	CmdGetAllocSize   = 13
	CmdHello          = 14
	CmdDevCount       = 15
	CmdGraphRecompute = 16
	CmdMemsetTensor   = 17
	CmdCount          = 18
)

// ReplySize is each command's reply size.
var ReplySize = [CmdCount]int{
	CmdAllocBuffer:    16,
	CmdGetAlignment:   8,
	CmdGetMaxSize:     8,
	CmdBufferGetBase:  8,
	CmdFreeBuffer:     -1,
	CmdBufferClear:    -1,
	CmdSetTensor:      -1,
	CmdSetTensorHash:  1,
	CmdGetTensor:      -2,
	CmdCopyTensor:     1,
	CmdGraphCompute:   -1,
	CmdGetDeviceMem:   16,
	CmdInitTensor:     -1,
	CmdGetAllocSize:   8,
	CmdHello:          4 + ConnCapsSize,
	CmdDevCount:       4,
	CmdGraphRecompute: -1,
	CmdMemsetTensor:   -1,
}

// The layout of a packed rpc_tensor (296 bytes) and of the requests that
// hold one.
const (
	TensorSize    = 296
	TensorType    = 8
	TensorBuffer  = 12
	TensorNe      = 20
	TensorNb      = 36
	TensorOp      = 52
	TensorData    = 220
	TensorName    = 228 // NUL-terminated, in TensorNameMax bytes
	TensorNameMax = 64  // GGML_MAX_NAME

	// MEMSET_TENSOR's request: a tensor, the offset and size cleared,
	// then the byte value
	MemsetValue = TensorSize + 16
)

// TensorNamed reports whether the packed rpc_tensor at the start of req
// is named name.
func TensorNamed(req []byte, name string) bool {
	end := TensorName + len(name)
	if len(name) >= TensorNameMax || end >= len(req) || req[end] != 0 {
		return false
	}
	return string(req[TensorName:end]) == name
}

// The ops of enum ggml_op (the pin's numbers) whose allocation a backend
// may make larger than the tensor: ggml_op_alloc_size_may_expand.
const (
	OpCumsum       = 16
	OpMulMat       = 29
	OpMulMatID     = 30
	OpArgsort      = 69
	OpTopK         = 70
	OpFlashAttnExt = 74
)

// OpMayExpand reports whether a backend may allocate more than the bytes
// of a tensor made by op.
func OpMayExpand(op uint32) bool { return rpcOpMayExpand[op] }

var rpcOpMayExpand = map[uint32]bool{OpCumsum: true, OpMulMat: true, OpMulMatID: true, OpArgsort: true, OpTopK: true, OpFlashAttnExt: true}

// TensorNBytes is ggml_nbytes of a packed rpc_tensor, false when its
// type is unknown or its size overflows.
func TensorNBytes(t []byte) (uint64, bool) {
	typ := gtype.Type(binary.LittleEndian.Uint32(t[TensorType:]))
	tr, ok := typ.Traits()
	if !ok || tr.BlockSize <= 0 || tr.TypeSize <= 0 {
		return 0, false
	}
	var ne, nb [4]uint64
	for i := range 4 {
		ne[i] = uint64(binary.LittleEndian.Uint32(t[TensorNe+4*i:]))
		nb[i] = uint64(binary.LittleEndian.Uint32(t[TensorNb+4*i:]))
		if ne[i] == 0 {
			return 0, true
		}
	}
	var n uint64
	if tr.BlockSize == 1 {
		n = uint64(tr.TypeSize)
	} else {
		hi, lo := bits.Mul64(ne[0], nb[0])
		if hi != 0 {
			return 0, false
		}
		n = lo / uint64(tr.BlockSize)
	}
	for i := range 4 {
		if i == 0 && tr.BlockSize != 1 {
			continue
		}
		hi, lo := bits.Mul64(ne[i]-1, nb[i])
		var c uint64
		n, c = bits.Add64(n, lo, 0)
		if hi != 0 || c != 0 {
			return 0, false
		}
	}
	return n, true
}

// rpcRowPad is the most a backend pads a tensor's allocation: one row of
// rpcPadColumns columns, plus an alignment's worth.
func rpcRowPad(t []byte) uint64 {
	typ := gtype.Type(binary.LittleEndian.Uint32(t[TensorType:]))
	r, err := typ.RowSize(rpcPadColumns)
	if err != nil || r < 0 {
		r = 0
	}
	return uint64(r) + rpcMaxAlignment/256
}

// rpcTail is the last u64 of a request (GET_TENSOR's size), 0 if short.
func rpcTail(req []byte) uint64 {
	if len(req) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(req[len(req)-8:])
}

// tensorBytes sizes the tensor in a GET_ALLOC_SIZE request (a uint32
// device, then a packed rpc_tensor): ggml_nbytes, which is what the client
// needs at least; 0 for a request too short to hold one.
func tensorBytes(req []byte) uint64 {
	if len(req) < 4+TensorSize {
		return 0
	}
	n, ok := TensorNBytes(req[4:])
	if !ok {
		return 0
	}
	return n
}

func CmdName(cmd byte) string {
	names := [...]string{"ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE", "FREE_BUFFER", "BUFFER_CLEAR", "SET_TENSOR", "SET_TENSOR_HASH",
		"GET_TENSOR", "COPY_TENSOR", "GRAPH_COMPUTE", "GET_DEVICE_MEMORY", "INIT_TENSOR", "GET_ALLOC_SIZE", "HELLO", "DEVICE_COUNT", "GRAPH_RECOMPUTE", "MEMSET_TENSOR"}
	if int(cmd) < len(names) {
		return names[cmd]
	}
	return fmt.Sprintf("command %d", cmd)
}
