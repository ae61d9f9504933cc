package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ggload/ggload/loader"
)

func init() {
	register(command{"load", "load a model with llama.cpp's flags and report [--check-tensors] [--json] [--tensors]", runLoad})
}

func runLoad(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("load")
	var pf placeFlags
	pf.add(fs)
	asJSON := fs.Bool("json", false, "print JSON: every tensor, every buffer, timings")
	tensors := fs.Bool("tensors", false, "list every tensor with its buffer and how its bytes arrived")
	check := fs.Bool("check-tensors", false, "validate every row (NaN/Inf) while loading")
	verify := fs.Bool("verify", false, "after loading, read every tensor back from its device and compare it with the file")
	readers := fs.Int("readers", 0, "parallel file readers (0: chosen for this machine, 1: sequential)")
	noProgress := fs.Bool("no-progress", false, "no progress bar, even on a terminal")
	slots := fs.Int("staging-slots", 0, "pinned staging buffers per device for uploads (0: 4, as llama.cpp)")
	slotSize := fs.String("staging-size", "", "size of one staging buffer (default 1MiB, or 64MiB + 2×alignment under direct I/O)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: ggload load MODEL [flags]")
	}
	rt, m, p, reasoning, err := planModel(&pf, pos[0])
	if err != nil {
		return err
	}
	defer m.Close()
	opts := loader.Options{CheckTensors: *check, Readers: *readers, StagingSlots: *slots}
	if *slotSize != "" {
		n, err := parseSize(*slotSize)
		if err != nil {
			return fmt.Errorf("--staging-size: %w", err)
		}
		opts.StagingSize = uint64(n)
	}
	if !*noProgress && !*asJSON && isTerminal(os.Stderr) {
		bar := newProgressBar(os.Stderr)
		opts.Progress = bar.update
		defer bar.finish()
	}
	lm, err := loader.Load(ctx, rt, m, p, opts)
	if err != nil {
		return err
	}
	defer lm.Close()
	if opts.Progress != nil {
		opts.Progress(0, 0) // clear the bar before the report
	}
	var verified *loader.Verified
	if *verify {
		v, err := lm.Verify()
		if err != nil {
			return err
		}
		verified = &v
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Load     *loader.Model    `json:"load"`
			Fit      []string         `json:"fit,omitempty"`
			Verified *loader.Verified `json:"verified,omitempty"`
		}{lm, reasoning, verified})
	}
	for _, r := range reasoning {
		fmt.Fprintln(stdout, "fit: "+r)
	}
	lm.Report(stdout, *tensors)
	if verified != nil {
		fmt.Fprintf(stdout, "verified: %d tensors read back from their devices equal the file", verified.Tensors)
		if verified.Repacked > 0 {
			fmt.Fprintf(stdout, " (%d repacked tensors cannot be read back)", verified.Repacked)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// progressBar draws a one-line bar on a terminal, at most every 50 ms.
type progressBar struct {
	w     io.Writer
	start time.Time
	last  time.Time
	drawn bool
}

func newProgressBar(w io.Writer) *progressBar { return &progressBar{w: w, start: time.Now()} }

// update draws done/total; total 0 clears the line.
func (b *progressBar) update(done, total uint64) bool {
	if total == 0 {
		b.finish()
		return true
	}
	now := time.Now()
	if done < total && now.Sub(b.last) < 50*time.Millisecond {
		return true
	}
	b.last = now
	const width = 40
	frac := float64(done) / float64(total)
	n := int(frac * width)
	rate := float64(done) / now.Sub(b.start).Seconds() / 1e9
	fmt.Fprintf(b.w, "\r[%s%s] %5.1f%% %8.1f/%.1f MiB %6.2f GB/s", strings.Repeat("=", n), strings.Repeat(" ", width-n), 100*frac,
		float64(done)/(1<<20), float64(total)/(1<<20), rate)
	b.drawn = true
	return true
}

func (b *progressBar) finish() {
	if b.drawn {
		fmt.Fprint(b.w, "\r\033[K")
		b.drawn = false
	}
}
