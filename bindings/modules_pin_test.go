package bindings_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/lab/testenv"
)

// The backend modules and their order are those ggml's
// ggml_backend_load_all_from_path loads in the pinned source.
func TestModuleNamesOfThePin(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testenv.SourceTree(t), "ggml", "src", "ggml-backend-reg.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)void ggml_backend_load_all_from_path\(.*?\n}`).Find(src)
	var pin []string
	for _, m := range regexp.MustCompile(`ggml_backend_load_best\("([a-z0-9]+)"`).FindAllSubmatch(body, -1) {
		pin = append(pin, string(m[1]))
	}
	if len(pin) == 0 || !slices.Equal(pin, bindings.ModuleNames()) {
		t.Errorf("the pin loads %v, ggload knows %v", pin, bindings.ModuleNames())
	}
}
