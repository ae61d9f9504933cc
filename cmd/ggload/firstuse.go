package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/ggload/ggload/bindings"
)

// missingLibraries says, after a command that found no native set, what
// installs one: the exact command. On a terminal it offers to run it
// (ggload fetch, with npm's registry where none is configured) and, once
// it has, to run the command again: the first use of a ggload that go
// install made.
func missingLibraries(ctx context.Context, err error, args []string, in io.Reader, stderr io.Writer, interactive bool) error {
	if !errors.Is(err, bindings.ErrNotFound) || os.Getenv("GGLOAD_LIB_DIR") != "" {
		return err
	}
	cmd := bindings.FetchCommand()
	fmt.Fprintf(stderr, "ggload: %v\n\nggload needs llama.cpp %s's ggml libraries; install them (once, into the user cache) with:\n\n    %s\n\n", err, pinTag(), cmd)
	if !interactive {
		return errSaid
	}
	fmt.Fprint(stderr, "Run it now? [y/N] ")
	answer, _ := bufio.NewReader(in).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return errSaid
	}
	fetchArgs := []string{}
	if strings.Contains(cmd, "--registry") {
		out, err := exec.CommandContext(ctx, "npm", "config", "get", "registry").Output()
		if err != nil {
			return fmt.Errorf("npm config get registry: %w (give the registry with ggload fetch --registry URL)", err)
		}
		fetchArgs = append(fetchArgs, "--registry", strings.TrimSpace(string(out)))
	}
	fetchArgs = append(fetchArgs, bindings.FetchSets()...)
	if err := runFetch(ctx, fetchArgs, stderr); err != nil {
		return err
	}
	if len(args) == 0 || args[0] == "fetch" {
		return nil
	}
	fmt.Fprintf(stderr, "\nggload: again: ggload %s\n", strings.Join(args, " "))
	return run(ctx, args, os.Stdout, stderr)
}

// errSaid is an error whose message was printed already.
var errSaid = errors.New("the native libraries are not installed")
