package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
)

// The example on CUDA0: layer 0's projections computed by the CUDA
// backend's kernels from weights loaded onto it agree with the CPU's.
func TestAttentionOnCUDA(t *testing.T) {
	cuda := testenv.CUDA(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var out bytes.Buffer
	if err := run([]string{"-devices", cuda.Name(), "-tokens", "0,5,4095"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	ok := false
	for _, line := range testenv.Lines(out.String()) {
		f := strings.Fields(line)
		if len(f) == 6 && f[0] == cuda.Name() && f[1] == cuda.Name() && f[5] == "ok" {
			ok = true
		}
	}
	if !ok {
		t.Fatalf("no line saying %s computed and agreed with the CPU in\n%s", cuda.Name(), out.String())
	}
	t.Log("\n" + out.String())
}
