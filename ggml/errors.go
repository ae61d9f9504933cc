package ggml

import "errors"

// Errors callers branch on, all usable with errors.Is. Alongside them:
// ErrClosed (runtime.go), ErrRPCUnreachable and ErrRPCFailed (rpc.go; the
// guard, internal/rpcrelay, wraps the latter), ErrUnknownDevice, ErrUnknownBufferType, and the standard
// library's errors.ErrUnsupported for what a device or the native set
// cannot do (events, buffers from host memory, split buffers, RPC).
var (
	// ErrOutOfMemory is wrapped when a device refuses an allocation.
	ErrOutOfMemory = errors.New("out of device memory")
	// ErrWriteOnly is wrapped when a tensor lives in a buffer whose type
	// stores data rearranged (the CPU's extra buffer types, CPU_REPACK)
	// and cannot be read back. Plan with place.Params.NoExtraBufts (the
	// CLI's --no-repack) to keep weights readable.
	ErrWriteOnly = errors.New("buffer type stores data repacked and cannot be read back")
)
