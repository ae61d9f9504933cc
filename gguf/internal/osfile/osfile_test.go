//go:build unix

package osfile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestOpenRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	reg := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(reg, []byte("GGUF"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, kind string }{
		{fifo, "a FIFO"},
		{sock, "a socket"},
		{"/dev/zero", "a character device"},
		{"/dev/null", "a character device"},
		{dir, "a directory"},
	} {
		done := make(chan error, 1)
		go func() {
			f, _, err := Open(c.path)
			if f != nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.kind) || !strings.Contains(err.Error(), c.path) {
				t.Errorf("Open(%s) = %v, want not a regular file (%s) naming the path", c.path, err, c.kind)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Open(%s) blocked", c.path)
		}
	}
	f, fi, err := Open(reg)
	if err != nil || fi.Size() != 4 {
		t.Fatalf("Open(regular) = %v, %v", fi, err)
	}
	// the descriptor reads blocking again
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl int
	rc.Control(func(fd uintptr) { fl, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Errorf("flags %#x, %v: still non-blocking", fl, err)
	}
	f.Close()
	if _, _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	// a symlink to a regular file is followed
	link := filepath.Join(dir, "link")
	if err := os.Symlink(reg, link); err != nil {
		t.Fatal(err)
	}
	if f, _, err := Open(link); err != nil {
		t.Errorf("symlink: %v", err)
	} else {
		f.Close()
	}
}
