package native

import (
	"regexp"
	"sort"
	"testing"
)

func TestPin(t *testing.T) {
	p := Load()
	if p.LlamaCppTag != "v0.5.0" || p.GGMLVersion != "0.25.1" || p.NPMVersion != "3.22.1" {
		t.Fatalf("pin %+v", p)
	}
	sha := regexp.MustCompile(`^[0-9a-f]{64}$`)
	if !sha.MatchString(p.Vars["NPM_SOURCE_SHA256"]) {
		t.Errorf("source sha256 %q", p.Vars["NPM_SOURCE_SHA256"])
	}
	plats := p.Platforms()
	sort.Strings(plats)
	want := []string{"linux-x64", "linux-x64-cuda", "linux-x64-vulkan"}
	if len(plats) != len(want) {
		t.Fatalf("platforms %v", plats)
	}
	for i, pl := range want {
		if plats[i] != pl {
			t.Fatalf("platforms %v", plats)
		}
		name, s, ok := p.Package(pl)
		if !ok || name != "@node-llama-cpp/"+pl || !sha.MatchString(s) {
			t.Errorf("%s: %q %q %v", pl, name, s, ok)
		}
	}
	if _, _, ok := p.Package("darwin-arm64"); ok {
		t.Error("darwin-arm64 has no pinned prebuilt")
	}
}
