package ggml

const rpcDescriptors = 2 * rpcConnDescriptors

// descriptorHeadroom: Windows handles are not bounded by a per-process
// limit to check.
func descriptorHeadroom(int) error { return nil }
