package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// bench --size with several sizes: every case timed on a generated model
// of each size, and how its cost per GiB grows.

// scaleGoal is how much more a GiB may cost at the largest size than at
// the first.
const scaleGoal = 1.10

// ScaleRow is one case across the sizes.
type ScaleRow struct {
	Case
	GiB      []float64 `json:"gib"`       // each size's model
	SPerGiB  []float64 `json:"s_per_gib"` // ggload's median load over the model's GiB (0: failed)
	ExtraRSS []int64   `json:"extra_rss"` // ggload's median extra RSS
	Llama    []float64 `json:"llama_s_per_gib,omitempty"`
	Growth   float64   `json:"growth"` // the largest size's s/GiB over the first's
	Met      bool      `json:"met"`
}

// scaleRows lines the reports' rows up by case.
func scaleRows(reps []Report) []ScaleRow {
	var rows []ScaleRow
	index := map[Case]int{}
	for k, rep := range reps {
		gib := float64(rep.Bytes) / (1 << 30)
		for _, r := range rep.Rows {
			i, ok := index[r.Case]
			if !ok {
				i = len(rows)
				index[r.Case] = i
				rows = append(rows, ScaleRow{Case: r.Case, GiB: make([]float64, len(reps)), SPerGiB: make([]float64, len(reps)), ExtraRSS: make([]int64, len(reps))})
			}
			row := &rows[i]
			row.GiB[k] = gib
			if r.Ggload.Err == "" {
				row.SPerGiB[k] = r.Ggload.LoadS / gib
				row.ExtraRSS[k] = r.Ggload.ExtraRSS
			}
			if r.Llama != nil && r.Llama.Err == "" {
				if row.Llama == nil {
					row.Llama = make([]float64, len(reps))
				}
				row.Llama[k] = r.Llama.LoadS / gib
			}
		}
	}
	for i := range rows {
		r := &rows[i]
		first, last := r.SPerGiB[0], r.SPerGiB[len(r.SPerGiB)-1]
		if first > 0 && last > 0 {
			r.Growth = last / first
			r.Met = r.Growth <= scaleGoal
		}
	}
	return rows
}

// outputScale saves and prints the reports of several sizes and the scale
// table.
func (o *Options) outputScale(stdout io.Writer, reps []Report) error {
	rows := scaleRows(reps)
	all := struct {
		Sizes []Report   `json:"sizes"`
		Scale []ScaleRow `json:"scale"`
	}{reps, rows}
	if printed, err := o.saveAndJSON(stdout, all); printed || err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"mode", "target"}
	for _, rep := range reps {
		head = append(head, fmt.Sprintf("%.2f GiB s/GiB", float64(rep.Bytes)/(1<<30)), "extra MiB")
	}
	head = append(head, "growth", "llama.cpp s/GiB")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range rows {
		cols := []string{r.Mode, r.Target}
		for k := range reps {
			if r.SPerGiB[k] == 0 {
				cols = append(cols, "error", "")
				continue
			}
			cols = append(cols, fmt.Sprintf("%.3f", r.SPerGiB[k]), mibs(r.ExtraRSS[k]))
		}
		growth := ""
		if r.Growth > 0 {
			growth = fmt.Sprintf("%.2f× (%s)", r.Growth, yesNo(r.Met))
		}
		var ll []string
		for _, x := range r.Llama {
			ll = append(ll, fmt.Sprintf("%.3f", x))
		}
		cols = append(cols, growth, strings.Join(ll, " "))
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintf(stdout, "s/GiB: ggload's median load over the model's size; growth: the largest size's s/GiB over the first's (goal: ≤ %.2f×); extra: the median extra RSS, as in each table\n", scaleGoal)
	return nil
}
