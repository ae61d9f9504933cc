//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

// ggloadProcess runs this binary as ggload with args, through wrapper.
func ggloadProcess(wrapper []string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, wrapper...), os.Args[0]), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), asGgloadEnv+"=1")
	return cmd
}

// crashed tells a process that died of a signal or a Go fatal error from
// one that ended with a clean error.
func crashed(st *os.ProcessState, out string) bool {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return true
	}
	for _, s := range []string{"SIGSEGV", "SIGABRT", "fatal error", "panic:", "goroutine 1 ["} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// Loading onto an RPC server with the descriptor limit (ulimit -n) at
// every value from too few to enough, in three load modes: each run ends,
// within seconds, either loaded or with an error that says the process ran
// out of file descriptors; never a hang, a native crash or an abort.
func TestRPCUnderDescriptorLimits(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		testenv.Missing(t, "prlimit", "needs prlimit (util-linux)")
	}
	ep := testenv.RPC(t, 1)[0]
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 256, FF: 512, Heads: 2, Vocab: 256})
	loaded, refused := 0, 0
	for n := 8; n <= 24; n++ {
		for _, mode := range []string{"mmap", "none", "dio"} {
			cmd := ggloadProcess([]string{prlimit, fmt.Sprintf("--nofile=%d", n)}, "load", "--rpc", ep, path, "-dev", "RPC0", "-lm", mode)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("ulimit -n %d, %s: ggload hung:\n%s", n, mode, out.String())
			}
			s, st := out.String(), cmd.ProcessState
			switch {
			case crashed(st, s):
				t.Fatalf("ulimit -n %d, %s: ggload crashed (%v):\n%s", n, mode, st, s)
			case st.ExitCode() == 0:
				loaded++
			case st.ExitCode() == 1 && (strings.Contains(s, "file descriptors") || strings.Contains(s, "too many open files")):
				refused++
			default:
				t.Fatalf("ulimit -n %d, %s: exit %v without naming the descriptors:\n%s", n, mode, st, s)
			}
		}
	}
	if loaded == 0 || refused == 0 {
		t.Fatalf("%d loads, %d refusals: the limits did not span both", loaded, refused)
	}
	t.Logf("%d loaded, %d refused with the descriptors named", loaded, refused)
}

// One SIGTERM or SIGINT ends ggload within a second with 143 or 130, in
// states that do not notice a cancellation: waiting on an RPC server that
// accepted the connection and never answers (the probe's timeout is 5 s),
// and waiting on one whose handshake hangs behind the native client.
func TestSignalEndsEveryState(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // accepted, never answered
		}
	}()
	for _, c := range []struct {
		sig  os.Signal
		code int
	}{{syscall.SIGTERM, 143}, {os.Interrupt, 130}} {
		cmd := ggloadProcess(nil, "devices", "--rpc", silent.Addr().String())
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond) // well inside the wait
		start := time.Now()
		cmd.Process.Signal(c.sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("%v: ggload did not end:\n%s", c.sig, out.String())
		}
		took := time.Since(start)
		if st := cmd.ProcessState; st.ExitCode() != c.code || took > time.Second {
			t.Fatalf("%v: exit %v after %v, want %d within a second:\n%s", c.sig, st, took, c.code, out.String())
		}
		t.Logf("%v: exit %d after %v", c.sig, c.code, took.Round(time.Millisecond))
	}
}
