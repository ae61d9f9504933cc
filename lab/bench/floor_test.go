package bench

import (
	"testing"

	"github.com/ggload/ggload/lab/testenv"
)

// The floor of uploads to an RPC server sends its 256 MiB as a load sends
// tensors, a request of rpcFloorPiece at a time: one request of the whole
// would have the pin's server take it into memory mapped anew for it.
func TestUploadFloorSendsPieces(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.RPC(t, 1)
	var found bool
	for _, d := range rt.Devices() {
		if !d.IsRPC() {
			continue
		}
		found = true
		u, err := newUploader(d)
		if err != nil {
			t.Fatal(err)
		}
		before, _ := d.RPCTraffic()
		if err := u.copyOnce(); err != nil {
			u.free()
			t.Fatal(err)
		}
		after, _ := d.RPCTraffic()
		u.free()
		if u.n != 256<<20 {
			t.Fatalf("%s: the floor's copy is %d bytes, want 256 MiB", d.Name(), u.n)
		}
		// each request carries a tensor's description (rpc_tensor, about
		// 300 bytes) besides its data; the read back after them one more
		pieces := u.n / rpcFloorPiece
		if over := after - before - u.n; over < pieces*300 || over > (pieces+1)*400 {
			t.Fatalf("%s: %d bytes besides the %d of data, want the requests of %d pieces (about %d)", d.Name(), over, u.n, pieces, pieces*330)
		}
		break
	}
	if !found {
		t.Fatal("no RPC device registered")
	}
}
