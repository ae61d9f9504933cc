package jinja

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/chat/internal/chattest"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// all says whether the whole of a conformance suite runs (else a sample).
func all() bool { return os.Getenv("GGLOAD_CHAT_ALL") != "" }

// oracle is a running testdata/oracle.cpp: the pin's jinja runtime.
type oracle struct {
	t   testing.TB
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	loc *time.Location // the zone its TZ names, for ours
}

// Zones the oracle runs in, and the same zones in Go: named by POSIX TZ
// strings, which need no time zone database.
var (
	zoneUTC   = oracleZone{"UTC0", time.FixedZone("UTC", 0)}
	zoneIndia = oracleZone{"IST-5:30", time.FixedZone("IST", 5*3600+1800)}
	zoneWest  = oracleZone{"XYZ+7", time.FixedZone("XYZ", -7*3600)}
)

type oracleZone struct {
	tz  string
	loc *time.Location
}

func oracleBin(t testing.TB) string {
	t.Helper()
	src, err := filepath.Abs("testdata/oracle.cpp")
	if err != nil {
		t.Fatal(err)
	}
	return cxx.Build(t, "jinja-oracle", []string{src}, "-O2")
}

// startOracle runs the oracle in mode, in the zone.
func startOracle(t testing.TB, mode string, zone oracleZone) *oracle {
	t.Helper()
	bin := oracleBin(t)
	cmd := cxx.Command(t, bin, mode)
	cmd.Env = append(cmd.Env, "TZ="+zone.tz)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &oracle{t: t, cmd: cmd, in: in, out: bufio.NewReaderSize(outp, 1<<20), loc: zone.loc}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	return o
}

// call sends one request and reads its n answer fields.
func (o *oracle) call(n int, fields ...string) []string {
	o.t.Helper()
	if err := chattest.WriteFields(o.in, fields...); err != nil {
		o.t.Fatalf("oracle: %v", err)
	}
	out := make([]string, n)
	for i := range out {
		f, err := chattest.ReadField(o.out)
		if err != nil {
			o.t.Fatalf("oracle died on request %q: %v", fields, err)
		}
		out[i] = f
	}
	return out
}

// renderReq is one render for both engines.
type renderReq struct {
	tmpl     string
	vars     string // a JSON object
	preserve string // "", "0", "1"
	effort   string // "" or "=effort"
	now      int64
	loc      *time.Location // the zone of now, the oracle's
	mode     string         // the context's source: "norm", "orig" or "none"
	mark     bool
}

type renderRes struct {
	ok    bool
	out   string // the output, or the error message
	parts string // the parts, encoded as the oracle encodes them
}

func (o *oracle) render(q renderReq) renderRes {
	mark := "0"
	if q.mark {
		mark = "1"
	}
	mode := q.mode
	if mode == "" {
		mode = "norm"
	}
	a := o.call(3, q.tmpl, q.vars, q.preserve, q.effort, strconv.FormatInt(q.now, 10), mode, mark)
	return renderRes{ok: a[0] == "OK", out: a[1], parts: a[2]}
}

func encodeParts(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Input {
			b.WriteByte('I')
		} else {
			b.WriteByte('T')
		}
		b.WriteString(strconv.Itoa(len(p.Text)))
		b.WriteByte(':')
		b.WriteString(p.Text)
	}
	return b.String()
}

// tryRender is render, false where the oracle died or hung on the case.
func (o *oracle) tryRender(q renderReq) (renderRes, bool) {
	mark := "0"
	if q.mark {
		mark = "1"
	}
	mode := q.mode
	if mode == "" {
		mode = "norm"
	}
	if err := chattest.WriteFields(o.in, q.tmpl, q.vars, q.preserve, q.effort, strconv.FormatInt(q.now, 10), mode, mark); err != nil {
		return renderRes{}, false
	}
	watchdog := time.AfterFunc(20*time.Second, func() { o.cmd.Process.Kill() })
	defer watchdog.Stop()
	var a [3]string
	for i := range a {
		f, err := chattest.ReadField(o.out)
		if err != nil {
			return renderRes{}, false
		}
		a[i] = f
	}
	return renderRes{ok: a[0] == "OK", out: a[1], parts: a[2]}, true
}
