package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/serve/httpapi"
)

// slotsBusy is how many slots /slots says are processing.
func slotsBusy(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/slots")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var slots []struct {
		Processing bool `json:"is_processing"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&slots); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range slots {
		if s.Processing {
			n++
		}
	}
	return n
}

// waitIdle waits until no slot processes (or fails after d).
func waitIdle(t *testing.T, base string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for slotsBusy(t, base) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("slots still busy after %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client that closes its connection ends its request and frees its
// slot, streamed or not; the server goes on serving.
func TestClosedConnectionFreesSlot(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	srv, _ := newServer(t, path, config{nCtx: 4096, nParallel: 1})
	for _, stream := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		body := fmt.Sprintf(`{"prompt":"Hello","n_predict":-1,"ignore_eos":true,"stream":%v}`, stream)
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/completion", strings.NewReader(body))
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if stream {
				bufio.NewReader(resp.Body).ReadString('\n') // the first event
			}
			io.Copy(io.Discard, resp.Body)
		}()
		deadline := time.Now().Add(30 * time.Second)
		for slotsBusy(t, srv.URL) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the request never took a slot")
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		waitIdle(t, srv.URL, 10*time.Second)
	}
	resp, err := http.Post(srv.URL+"/completion", "application/json", strings.NewReader(`{"prompt":"Hello","n_predict":2}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the closed connections: %v %v", resp, err)
	}
	resp.Body.Close()
}

// A client that stops reading its stream holds up no other request, and
// the slot comes free once its connection is dropped.
func TestStalledClientHoldsUpNoOne(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	srv, _ := newServer(t, path, config{nCtx: 4096, nParallel: 2})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	// a large stream asked for, never read
	body := `{"prompt":"Hello","n_predict":-1,"ignore_eos":true,"stream":true,"n_probs":10}`
	fmt.Fprintf(conn, "POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	time.Sleep(200 * time.Millisecond)
	for i := range 3 {
		t0 := time.Now()
		resp, err := http.Post(srv.URL+"/completion", "application/json", strings.NewReader(`{"prompt":"Other","n_predict":8}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d beside the stalled one: %v %v", i, resp, err)
		}
		resp.Body.Close()
		t.Logf("request %d beside the stalled stream: %v", i, time.Since(t0))
	}
	if slotsBusy(t, srv.URL) == 0 {
		t.Fatal("the stalled stream ended before the others: the test proves nothing")
	}
	conn.Close()
	waitIdle(t, srv.URL, 30*time.Second)
}

// A body past the limit is refused with 413 before it is read whole.
func TestBodyLimit(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	srv, _ := newServer(t, path, config{nCtx: 512, nParallel: 1, http: httpapi.Options{MaxBodyBytes: 1000}})
	big := `{"prompt":"` + strings.Repeat("a", 2000) + `"}`
	resp, err := http.Post(srv.URL+"/tokenize", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
	// (a negative control: a body within the limit)
	resp, err = http.Post(srv.URL+"/tokenize", "application/json", strings.NewReader(`{"content":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d within the limit", resp.StatusCode)
	}
}

// No slot file can be named outside --slot-save-path.
func TestSlotFilesStayInTheirDirectory(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	dir := t.TempDir()
	srv, _ := newServer(t, path, config{nCtx: 512, nParallel: 1, slotSavePath: dir + "/"})
	for _, name := range []string{"../x.bin", "/etc/passwd", "a/b", `a\b`, "..", ".", "", "x.bin.", " x", "a:b", "\x01"} {
		for _, action := range []string{"save", "restore"} {
			b, _ := json.Marshal(map[string]string{"filename": name})
			resp, err := http.Post(srv.URL+"/slots/0?action="+action, "application/json", strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(out), "Invalid filename") {
				t.Errorf("%s %q: %d %s", action, name, resp.StatusCode, out)
			}
		}
	}
	resp, err := http.Post(srv.URL+"/slots/0?action=save", "application/json", strings.NewReader(`{"filename":"ok.bin"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a valid name: %v %v", resp, err)
	}
	resp.Body.Close()
}
