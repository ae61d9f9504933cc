package cpp

import (
	"strings"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// nativeMember reads a member of a native tensor.
func nativeMember(v Val, name string) (Val, bool) {
	t, ok := v.P.(*ops.Tensor)
	if !ok {
		return Void, false
	}
	switch name {
	case "ne":
		return Dims(ast.TI64, t.Ne), true
	case "nb":
		var nb [4]int64
		for i, x := range t.Nb {
			nb[i] = int64(x)
		}
		return Dims(ast.TU64, nb), true
	case "type":
		return Int(int64(t.Type), ast.TI32), true
	case "op":
		return Int(int64(t.Op), ast.TI32), true
	case "flags":
		return Int(int64(t.Flags), ast.TI32), true
	case "view_src":
		if t.ViewSrc == nil {
			return Null, true
		}
		return Val{K: KNative, P: (*ops.Tensor)(t.ViewSrc)}, true
	case "src":
		a := NewArray(ast.TPtr, ops.MaxSrc, true)
		for i, s := range t.Src {
			if s != nil {
				a.Cells[i].V = Val{K: KNative, P: (*ops.Tensor)(s)}
			}
		}
		return Val{K: KArr, P: a}, true
	case "name":
		n := t.Name[:]
		if i := strings.IndexByte(string(n), 0); i >= 0 {
			n = n[:i]
		}
		return Str(string(n)), true
	case "data":
		if t.Data == nil {
			return Null, true
		}
		return Int(int64(uintptr(t.Data)), ast.TU64), true
	}
	return Void, false
}
