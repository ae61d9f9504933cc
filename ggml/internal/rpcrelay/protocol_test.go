package rpcrelay_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml/internal/rpcrelay"
	"github.com/ggload/ggload/lab/testenv"
)

// The protocol as the relay speaks it is the pin's: every command's
// number and name, the version, the capabilities' size, the packed
// rpc_tensor's size and the offsets the guard reads, every reply's size,
// and the ops whose allocation may grow, all read from the pinned source.
func TestProtocolOfThePin(t *testing.T) {
	src := testenv.SourceTree(t)
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			t.Fatalf("the pin's %s: %v", rel, err)
		}
		return string(b)
	}
	rpc := read("ggml/src/ggml-rpc/ggml-rpc.cpp")
	header := read("ggml/include/ggml-rpc.h")
	transport := read("ggml/src/ggml-rpc/transport.h")
	ggmlh := read("ggml/include/ggml.h")

	define := func(text, name string) int {
		m := regexp.MustCompile(`(?m)^\s*#\s*define\s+` + name + `\s+(\d+)`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no #define %s in the pin", name)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if got := [3]int{define(header, "RPC_PROTO_MAJOR_VERSION"), define(header, "RPC_PROTO_MINOR_VERSION"), define(header, "RPC_PROTO_PATCH_VERSION")}; got != [3]int{rpcrelay.ProtoMajor, rpcrelay.ProtoMinor, rpcrelay.ProtoPatch} {
		t.Errorf("the pin speaks %v, the relay %d.%d.%d", got, rpcrelay.ProtoMajor, rpcrelay.ProtoMinor, rpcrelay.ProtoPatch)
	}
	m := regexp.MustCompile(`RPC_CONN_CAPS_SIZE\s*=\s*(\d+)`).FindStringSubmatch(transport)
	if m == nil {
		t.Fatal("no RPC_CONN_CAPS_SIZE in the pin")
	}
	if n, _ := strconv.Atoi(m[1]); n != rpcrelay.ConnCapsSize {
		t.Errorf("RPC_CONN_CAPS_SIZE %d, the relay's %d", n, rpcrelay.ConnCapsSize)
	}

	// enum rpc_cmd
	cmds := enumValues(t, rpc, "rpc_cmd")
	if cmds["RPC_CMD_NONE"] != rpcrelay.CmdCount {
		t.Errorf("the pin has %d commands before RPC_CMD_NONE, the relay %d", cmds["RPC_CMD_NONE"], rpcrelay.CmdCount)
	}
	goCmds := map[string]int{
		"RPC_CMD_ALLOC_BUFFER": rpcrelay.CmdAllocBuffer, "RPC_CMD_GET_ALIGNMENT": rpcrelay.CmdGetAlignment, "RPC_CMD_GET_MAX_SIZE": rpcrelay.CmdGetMaxSize,
		"RPC_CMD_BUFFER_GET_BASE": rpcrelay.CmdBufferGetBase, "RPC_CMD_FREE_BUFFER": rpcrelay.CmdFreeBuffer, "RPC_CMD_BUFFER_CLEAR": rpcrelay.CmdBufferClear,
		"RPC_CMD_SET_TENSOR": rpcrelay.CmdSetTensor, "RPC_CMD_SET_TENSOR_HASH": rpcrelay.CmdSetTensorHash, "RPC_CMD_GET_TENSOR": rpcrelay.CmdGetTensor,
		"RPC_CMD_COPY_TENSOR": rpcrelay.CmdCopyTensor, "RPC_CMD_GRAPH_COMPUTE": rpcrelay.CmdGraphCompute, "RPC_CMD_GET_DEVICE_MEMORY": rpcrelay.CmdGetDeviceMem,
		"RPC_CMD_INIT_TENSOR": rpcrelay.CmdInitTensor, "RPC_CMD_GET_ALLOC_SIZE": rpcrelay.CmdGetAllocSize, "RPC_CMD_HELLO": rpcrelay.CmdHello,
		"RPC_CMD_DEVICE_COUNT": rpcrelay.CmdDevCount, "RPC_CMD_GRAPH_RECOMPUTE": rpcrelay.CmdGraphRecompute, "RPC_CMD_MEMSET_TENSOR": rpcrelay.CmdMemsetTensor,
	}
	for name, v := range cmds {
		if name == "RPC_CMD_NONE" || name == "RPC_CMD_COUNT" {
			continue
		}
		g, ok := goCmds[name]
		switch {
		case !ok:
			t.Errorf("the pin's %s (%d) is unknown to the relay", name, v)
		case g != v:
			t.Errorf("%s is %d in the pin, %d in the relay", name, v, g)
		case rpcrelay.CmdName(byte(v)) != strings.TrimPrefix(name, "RPC_CMD_"):
			t.Errorf("%s is named %q", name, rpcrelay.CmdName(byte(v)))
		}
	}
	for name := range goCmds {
		if _, ok := cmds[name]; !ok {
			t.Errorf("the relay's %s is not the pin's", name)
		}
	}

	// the packed structures
	sizes, offsets := packedStructs(t, rpc, ggmlh, transport)
	if sizes["rpc_tensor"] != rpcrelay.TensorSize {
		t.Errorf("rpc_tensor is %d bytes in the pin, %d in the relay", sizes["rpc_tensor"], rpcrelay.TensorSize)
	}
	for field, want := range map[string]int{"type": rpcrelay.TensorType, "buffer": rpcrelay.TensorBuffer, "ne": rpcrelay.TensorNe, "nb": rpcrelay.TensorNb, "op": rpcrelay.TensorOp, "data": rpcrelay.TensorData, "name": rpcrelay.TensorName} {
		if got, ok := offsets["rpc_tensor."+field]; !ok || got != want {
			t.Errorf("rpc_tensor.%s is at %d in the pin (%v), %d in the relay", field, got, ok, want)
		}
	}
	if got, ok := offsets["rpc_msg_memset_tensor_req.value"]; !ok || got != rpcrelay.MemsetValue {
		t.Errorf("rpc_msg_memset_tensor_req.value is at %d in the pin (%v), %d in the relay", got, ok, rpcrelay.MemsetValue)
	}
	for name, v := range goCmds {
		rsp := "rpc_msg_" + strings.ToLower(strings.TrimPrefix(name, "RPC_CMD_")) + "_rsp"
		size, has := sizes[rsp]
		want := rpcrelay.ReplySize[v]
		switch {
		case has && size != want:
			t.Errorf("%s: the pin's %s is %d bytes, the relay expects %d", name, rsp, size, want)
		case !has && want >= 0:
			t.Errorf("%s: the relay expects a reply of %d bytes, the pin has no %s", name, want, rsp)
		}
	}
	t.Logf("%d commands, %d packed structures of the pin checked", len(goCmds), len(sizes))

	// the ops whose allocation may grow (ggml_op_alloc_size_may_expand)
	ops := enumValues(t, ggmlh, "ggml_op")
	backend := read("ggml/src/ggml-backend.cpp")
	i := strings.Index(backend, "bool ggml_op_alloc_size_may_expand(")
	if i < 0 {
		t.Fatal("no ggml_op_alloc_size_may_expand in the pin")
	}
	body := backend[i : i+strings.Index(backend[i:], "default:")]
	expand := map[int]bool{}
	for _, c := range regexp.MustCompile(`case (GGML_OP_\w+):`).FindAllStringSubmatch(body, -1) {
		v, ok := ops[c[1]]
		if !ok {
			t.Fatalf("%s is not in enum ggml_op", c[1])
		}
		expand[v] = true
	}
	for op := range ops["GGML_OP_COUNT"] {
		if rpcrelay.OpMayExpand(uint32(op)) != expand[op] {
			t.Errorf("op %d: the relay says may expand %v, the pin %v", op, rpcrelay.OpMayExpand(uint32(op)), expand[op])
		}
	}
}

// enumValues reads the values of a C enum's constants (implicit ones
// counted on from the last).
func enumValues(t *testing.T, text, enum string) map[string]int {
	t.Helper()
	m := regexp.MustCompile(`enum\s+` + enum + `\s*\{([^}]*)\}`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no enum %s in the pin", enum)
	}
	body := regexp.MustCompile(`//[^\n]*`).ReplaceAllString(m[1], "")
	out := map[string]int{}
	next := 0
	for _, item := range strings.Split(body, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, has := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if has {
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if err != nil {
				t.Fatalf("enum %s: %s = %s", enum, name, val)
			}
			next = n
		}
		out[name] = next
		next++
	}
	return out
}

// packedStructs sizes the structures between #pragma pack(push, 1) and
// its pop, and gives each field's offset as "struct.field".
func packedStructs(t *testing.T, rpc, ggmlh, transport string) (map[string]int, map[string]int) {
	t.Helper()
	i := strings.Index(rpc, "#pragma pack(push, 1)")
	j := strings.Index(rpc, "#pragma pack(pop)")
	if i < 0 || j < i {
		t.Fatal("no packed section in ggml-rpc.cpp")
	}
	consts := map[string]int{}
	for _, n := range []string{"GGML_MAX_DIMS", "GGML_MAX_SRC", "GGML_MAX_OP_PARAMS", "GGML_MAX_NAME"} {
		m := regexp.MustCompile(`#\s*define\s+` + n + `\s+(\d+)`).FindStringSubmatch(ggmlh)
		if m == nil {
			t.Fatalf("no %s in ggml.h", n)
		}
		consts[n], _ = strconv.Atoi(m[1])
	}
	if m := regexp.MustCompile(`RPC_CONN_CAPS_SIZE\s*=\s*(\d+)`).FindStringSubmatch(transport); m != nil {
		consts["RPC_CONN_CAPS_SIZE"], _ = strconv.Atoi(m[1])
	}
	prim := map[string]int{"uint8_t": 1, "int8_t": 1, "char": 1, "uint16_t": 2, "int16_t": 2, "uint32_t": 4, "int32_t": 4, "uint64_t": 8, "int64_t": 8}
	dim := func(expr string) int {
		expr = strings.TrimSpace(expr)
		if a, b, ok := strings.Cut(expr, "/"); ok {
			b = strings.TrimSpace(b)
			m := regexp.MustCompile(`sizeof\((\w+)\)`).FindStringSubmatch(b)
			if m == nil || prim[m[1]] == 0 {
				t.Fatalf("array size %q", expr)
			}
			return consts[strings.TrimSpace(a)] / prim[m[1]]
		}
		if n, err := strconv.Atoi(expr); err == nil {
			return n
		}
		n, ok := consts[expr]
		if !ok {
			t.Fatalf("array size %q", expr)
		}
		return n
	}
	sizes, offsets := map[string]int{}, map[string]int{}
	field := regexp.MustCompile(`^\s*(\w+)\s+(\w+)\s*(?:\[([^\]]+)\])?\s*;`)
	for _, s := range regexp.MustCompile(`struct\s+(\w+)\s*\{([^}]*)\};`).FindAllStringSubmatch(rpc[i:j], -1) {
		off := 0
		for _, line := range strings.Split(s[2], "\n") {
			line = regexp.MustCompile(`//.*`).ReplaceAllString(line, "")
			f := field.FindStringSubmatch(line)
			if f == nil {
				if strings.TrimSpace(line) != "" {
					t.Fatalf("struct %s: cannot read %q", s[1], line)
				}
				continue
			}
			size, ok := prim[f[1]]
			if !ok {
				if size, ok = sizes[f[1]]; !ok {
					t.Fatalf("struct %s: type %s", s[1], f[1])
				}
			}
			if f[3] != "" {
				size *= dim(f[3])
			}
			offsets[s[1]+"."+f[2]] = off
			off += size
		}
		sizes[s[1]] = off
	}
	return sizes, offsets
}
