//go:build linux

package rpcrelay

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const guardFDsChild = "GGLOAD_TEST_GUARD_FDS_CHILD"

// With the process out of file descriptors, the guard still takes the
// native client's connection (it gives up the descriptor it keeps in
// reserve), answers it with well-formed replies, and records why the
// server could not be reached; once descriptors are free again it takes
// connections as before. (The guard used to stop accepting at the first
// EMFILE, and the native client then waited for a reply forever.) The
// test runs in a child process, which lowers its own RLIMIT_NOFILE.
func TestGuardOutOfDescriptors(t *testing.T) {
	if os.Getenv(guardFDsChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGuardOutOfDescriptors$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), guardFDsChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestGuardOutOfDescriptors") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 128, Max: 128}); err != nil {
		t.Fatal(err)
	}
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() { // a server that answers the handshake
				defer c.Close()
				hdr := make([]byte, 9+ConnCapsSize)
				if _, err := io.ReadFull(c, hdr); err != nil {
					return
				}
				rsp := binary.LittleEndian.AppendUint64(nil, 4+ConnCapsSize)
				rsp = append(rsp, ProtoMajor, ProtoMinor)
				c.Write(append(rsp, make([]byte, 2+ConnCapsSize)...))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	g, err := New(srv.Addr().String(), 2*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer g.ln.Close()
	time.Sleep(50 * time.Millisecond) // the guard takes its reserve
	hello := func() error {
		c, err := net.DialTimeout("tcp", g.local, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		msg := make([]byte, 9+ConnCapsSize)
		msg[0] = CmdHello
		binary.LittleEndian.PutUint64(msg[1:], ConnCapsSize)
		if _, err := c.Write(msg); err != nil {
			return err
		}
		rsp := make([]byte, 8+4+ConnCapsSize)
		_, err = io.ReadFull(c, rsp)
		return err
	}
	// every descriptor but one taken: the client's socket gets it, the
	// guard has none to accept with but its reserve, none to dial with
	var held []int
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		held = append(held, fd)
	}
	unix.Close(held[len(held)-1])
	held = held[:len(held)-1]
	if err := hello(); err != nil {
		t.Fatalf("out of descriptors: no reply: %v", err)
	}
	if err := g.Err(); err == nil || !strings.Contains(err.Error(), "too many open files") {
		t.Fatalf("the failure recorded: %v", err)
	}
	t.Logf("out of descriptors: %v", g.Err())
	for _, fd := range held {
		unix.Close(fd)
	}
	// descriptors back: a new session reaches the server
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := hello()
		if err == nil && g.Err() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("descriptors back: %v, %v", err, g.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
