package bindings

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// FindRPCServer locates the ggml-rpc-server executable: GGLOAD_RPC_SERVER,
// then native/lib/<platform>-src/ (scripts/build-native.sh puts it there),
// then the opened set's directory, then PATH.
func FindRPCServer() (string, error) {
	if p := os.Getenv("GGLOAD_RPC_SERVER"); p != "" {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
		return "", fmt.Errorf("GGLOAD_RPC_SERVER=%s: no such file", p)
	}
	var tried []string
	exeDir := ""
	if exe, err := os.Executable(); err == nil {
		exeDir = filepath.Dir(exe)
	}
	cands := []string{}
	for _, root := range libRoots(exeDir) {
		cands = append(cands, filepath.Join(root, Platform()+"-src", "ggml-rpc-server"))
	}
	if opened != nil {
		cands = append(cands, filepath.Join(opened.Loc.Dir, "ggml-rpc-server"))
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, nil
		}
		tried = append(tried, c)
	}
	if p, err := exec.LookPath("ggml-rpc-server"); err == nil {
		return p, nil
	}
	tried = append(tried, "$PATH")
	return "", fmt.Errorf("ggml-rpc-server not found (tried %s); build it with scripts/build-native.sh linux-x64 cpu,rpc", strings.Join(tried, ", "))
}
