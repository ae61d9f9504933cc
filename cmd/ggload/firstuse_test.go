package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A ggload that finds no native set (go install made it, and ggload fetch
// has not run) says what installs one, as the exact command: ggload
// fetch where the environment names an npm registry, else with npm's
// own registry on its command line.
func TestFirstUseSaysFetch(t *testing.T) {
	home := t.TempDir()
	base := []string{"HOME=" + home, "XDG_CACHE_HOME=" + home + "/.cache", "GGLOAD_LIB_DIR=", "GGLOAD_VARIANT=",
		"GGLOAD_NPM_REGISTRY=", "npm_config_registry=", "NPM_CONFIG_REGISTRY=", "npm_config_userconfig="}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, "\n    ggload fetch --registry \"$(npm config get registry)\"\n"},
		{[]string{"GGLOAD_NPM_REGISTRY=https://registry.invalid/"}, "\n    ggload fetch\n"},
	} {
		cmd := exec.Command(os.Args[0], "plan", "model.gguf")
		cmd.Dir = home
		cmd.Env = append(append(append(os.Environ(), asGgloadEnv+"=1"), base...), c.env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%v: %v\n%s", c.env, err, stderr.String())
		}
		if !strings.Contains(stderr.String(), c.want) || !strings.Contains(stderr.String(), "native ggml libraries not found") {
			t.Errorf("%v: stderr\n%s\nwant it to hold %q", c.env, stderr.String(), c.want)
		}
	}
}
