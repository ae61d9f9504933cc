package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// ggload-bench --http RATE: the model served on loopback by a server whose
// link is limited to RATE bytes a second (every connection shares it), and
// three measurements, each a median of --runs:
//   - the link: one GET of the whole file, what the limited server gives;
//   - the plan: opening the model and planning it from the file, and from
//     its URL (the requests made and the header bytes fetched);
//   - the load: a streaming load from the URL onto each target (load mode
//     none, every reader in flight), against the link.

// HTTPReport is the report of the HTTP measurements.
type HTTPReport struct {
	Rate      float64    `json:"rate_bytes_per_s"`
	LatencyS  float64    `json:"latency_s,omitempty"`
	LinkGBps  float64    `json:"link_gb_per_s"`
	PlanFileS float64    `json:"plan_file_s"`
	PlanURLS  float64    `json:"plan_url_s"`
	Requests  int64      `json:"plan_requests"`
	HeaderB   int64      `json:"plan_header_bytes"`
	Loads     []HTTPLoad `json:"loads"`
}

// HTTPLoad is the streaming load onto one target over the link.
type HTTPLoad struct {
	Target string  `json:"target"`
	S      float64 `json:"s"`        // the load's total
	GBps   float64 `json:"gb_per_s"` // the model's bytes over the total
	OfLink float64 `json:"of_link"`
	Err    string  `json:"error,omitempty"`
}

// linkGoal is the share of the link a streaming load should reach.
const linkGoal = 0.9

// limitedLink paces every write of every connection to rate bytes a
// second in all.
type limitedLink struct {
	mu   sync.Mutex
	rate float64
	next time.Time
}

// linkBurst is how far behind its schedule the link may fall and catch up
// (a sleep that overshoots is made up by the next writes).
const linkBurst = 5 * time.Millisecond

func (l *limitedLink) take(n int) {
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now.Add(-linkBurst)) {
		l.next = now.Add(-linkBurst)
	}
	l.next = l.next.Add(time.Duration(float64(n) / l.rate * float64(time.Second)))
	wait := time.Until(l.next)
	l.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
}

type pacedWriter struct {
	http.ResponseWriter
	l *limitedLink
}

func (w pacedWriter) Write(p []byte) (int, error) {
	const piece = 64 << 10
	n := 0
	for len(p) > 0 {
		k := min(len(p), piece)
		w.l.take(k)
		m, err := w.ResponseWriter.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// serveLimited serves the files at paths (by base name) on loopback, its
// link limited to rate, and returns the base URL and a stop function.
func serveLimited(paths []string, rate float64, latency time.Duration) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	link := &limitedLink{rate: rate}
	files := map[string]string{}
	for _, p := range paths {
		files["/"+filepath.Base(p)] = p
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if latency > 0 {
			time.Sleep(latency) // the round trip before the first byte
		}
		p, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		f, err := os.Open(p)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, st.Size(), st.ModTime().UnixNano()))
		http.ServeContent(pacedWriter{w, link}, r, p, st.ModTime(), f)
	})}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// measureHTTP runs the HTTP measurements of the model at path.
func (o *Options) measureHTTP(ctx context.Context, rt *ggml.Runtime, m *gguf.Model, targets []string, rate float64) (*HTTPReport, error) {
	base, stop, err := serveLimited(m.Paths, rate, o.HTTPLatency)
	if err != nil {
		return nil, err
	}
	defer stop()
	url := base + "/" + filepath.Base(m.Paths[0])
	size := int64(0)
	for _, f := range m.Files {
		size += f.Size
	}
	rep := &HTTPReport{Rate: rate, LatencyS: o.HTTPLatency.Seconds()}
	params := place.Params{NGPULayers: o.Layers, NoExtraBufts: o.NoExtraBufts}
	ho := httpsrc.Options{}

	// the link, as one reader of the whole first file sees it
	var link []float64
	for r := 0; r < o.Runs; r++ {
		t0 := time.Now()
		n, err := getAll(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("--http: the whole file: %w", err)
		}
		link = append(link, float64(n)/time.Since(t0).Seconds()/1e9)
	}
	rep.LinkGBps = statOf(link).Median

	// the plan, from the file and from the URL
	var fromFile, fromURL []float64
	for r := 0; r < o.Runs; r++ {
		t0 := time.Now()
		fm, err := gguf.OpenModel(m.Paths[0])
		if err != nil {
			return nil, err
		}
		_, err = place.New(ctx, rt, fm, params)
		fm.Close()
		if err != nil {
			return nil, err
		}
		fromFile = append(fromFile, time.Since(t0).Seconds())
		t0 = time.Now()
		um, err := httpsrc.OpenModel(ctx, url, ho)
		if err != nil {
			return nil, err
		}
		_, err = place.New(ctx, rt, um, params)
		fromURL = append(fromURL, time.Since(t0).Seconds())
		rep.Requests, rep.HeaderB = 0, 0
		for _, f := range um.Files {
			if hr, ok := f.Source().Reader.(*httpsrc.Reader); ok {
				rep.Requests += hr.Requests()
				rep.HeaderB += hr.Received()
			}
		}
		um.Close()
		if err != nil {
			return nil, err
		}
	}
	rep.PlanFileS, rep.PlanURLS = statOf(fromFile).Median, statOf(fromURL).Median

	// the streaming loads
	for _, t := range targets {
		row := HTTPLoad{Target: t}
		var took []float64
		for r := 0; r < o.Runs && row.Err == ""; r++ {
			s, err := streamLoad(ctx, rt, url, ho, t, params, o.Readers)
			if err != nil {
				row.Err = err.Error()
				break
			}
			took = append(took, s)
		}
		if row.Err == "" {
			row.S = statOf(took).Median
			row.GBps = float64(size) / row.S / 1e9
			row.OfLink = row.GBps / (rate / 1e9)
		}
		rep.Loads = append(rep.Loads, row)
	}
	return rep, nil
}

// streamLoad plans the model at url for the target and loads it, and
// returns the seconds from opening to loaded.
func streamLoad(ctx context.Context, rt *ggml.Runtime, url string, o httpsrc.Options, target string, params place.Params, readers int) (float64, error) {
	t0 := time.Now()
	um, err := httpsrc.OpenModel(ctx, url, o)
	if err != nil {
		return 0, err
	}
	defer um.Close()
	params.DeviceNames = (Case{Target: target}).Devices()
	p, err := place.New(ctx, rt, um, params)
	if err != nil {
		return 0, err
	}
	lm, err := loader.Load(ctx, p, loader.Options{Readers: readers})
	if err != nil {
		return 0, err
	}
	s := time.Since(t0).Seconds()
	lm.Close()
	return s, nil
}

// getAll reads the whole body at url and returns its length.
func getAll(ctx context.Context, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.Copy(io.Discard, resp.Body)
}

// printHTTP writes the HTTP measurements and their goal.
func printHTTP(w io.Writer, r *HTTPReport, size int64) {
	fmt.Fprintf(w, "over HTTP on loopback, the link limited to %.2f GB/s, %.0f ms before each answer (one GET of the whole file: %.2f GB/s):\n", r.Rate/1e9, r.LatencyS*1000, r.LinkGBps)
	fmt.Fprintf(w, "  plan from the file %.1f ms; from the URL %.1f ms, %d requests, %.2f MiB of header fetched of %.2f MiB\n",
		r.PlanFileS*1000, r.PlanURLS*1000, r.Requests, float64(r.HeaderB)/(1<<20), float64(size)/(1<<20))
	for _, l := range r.Loads {
		if l.Err != "" {
			fmt.Fprintf(w, "  load onto %-12s failed: %s\n", l.Target, l.Err)
			continue
		}
		verdict := "meets"
		if l.OfLink < linkGoal {
			verdict = "misses"
		}
		fmt.Fprintf(w, "  load onto %-12s %.3f s, %.2f GB/s: %.0f%% of the link (%s the goal of %.0f%%)\n", l.Target, l.S, l.GBps, 100*l.OfLink, verdict, 100*linkGoal)
	}
}
