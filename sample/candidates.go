// Port of llama.cpp src/llama-sampler.cpp (v0.5.0): llama_token_data_array
// and its partial sorts.

package sample

import (
	"errors"
	"math"

	"github.com/ggload/ggload/vocab"
)

// tokenData mirrors llama_token_data.
type tokenData struct {
	id    vocab.Token
	logit float32
	p     float32
}

// candidates mirrors llama_token_data_array: data may be a window into
// the buffer that a sampler moved forward (XTC does).
type candidates struct {
	data     []tokenData
	selected int
	sorted   bool
	err      error
}

var errEmpty = errors.New("sample: no candidates left to take the softmax of")

var negInf = float32(math.Inf(-1))

// the bucket mapping of llama_token_data_array_partial_sort, in float32
var (
	bucketLow, bucketHigh = float32(-10), float32(10)
	bucketScale           = float32(128) / (bucketHigh - bucketLow)
	bucketInter           = -bucketLow * bucketScale
)

// fmax is std::max(a, b): b only when a < b.
func fmax(a, b float32) float32 {
	if a < b {
		return b
	}
	return a
}

// toInt32 is C++'s int(float) on x86-64 (cvttss2si): truncation, and
// INT_MIN for NaN and anything outside int32's range.
func toInt32(f float32) int32 {
	if f != f || f >= 2147483648.0 || f < -2147483648.0 {
		return math.MinInt32
	}
	return int32(f)
}

func byLogitDesc(a, b *tokenData) bool { return a.logit > b.logit }

// bucketSort is llama_token_data_array_partial_sort: it writes into res
// the candidates of the top buckets (128 buckets over [-10, 10]), the
// first npartial of them sorted by logit, and returns res.
func bucketSort(c *candidates, npartial int, res []tokenData) []tokenData {
	const nbuckets = 128
	scale, inter := bucketScale, bucketInter
	var histo [nbuckets]int
	idx := make([]int32, len(c.data))
	for i := range c.data {
		ib := toInt32(scale*c.data[i].logit + inter)
		ib = max(0, min(nbuckets-1, ib))
		idx[i] = ib
		histo[ib]++
	}
	nhave := 0
	ib := nbuckets - 1
	for ; ib >= 0; ib-- {
		nhave += histo[ib]
		if nhave >= npartial {
			break
		}
	}
	if cap(res) < nhave {
		res = make([]tokenData, nhave)
	}
	res = res[:nhave]
	var starts [nbuckets]int
	off := 0
	for j := nbuckets - 1; j >= ib; j-- {
		starts[j] = off
		off += histo[j]
	}
	for i := range c.data {
		if j := int(idx[i]); j >= ib {
			res[starts[j]] = c.data[i]
			starts[j]++
		}
	}
	off = 0
	ndone := 0
	for j := nbuckets - 1; j > ib; j-- {
		stdSort(res[off:off+histo[j]], byLogitDesc)
		off += histo[j]
		ndone += histo[j]
	}
	partialSort(res, off, off+npartial-ndone, off+histo[ib], byLogitDesc)
	return res
}

// partialSortInPlace is llama_token_data_array_partial_sort_inplace.
func partialSortInPlace(c *candidates, npartial int) {
	if npartial <= 128 {
		stdPartialSort(c.data, npartial, byLogitDesc)
	} else {
		tmp := bucketSort(c, npartial, nil)
		copy(c.data, tmp[:npartial])
	}
	c.data = c.data[:npartial]
	c.sorted = true
}

// softmax is llama_sampler_softmax_impl.
func softmax(c *candidates, doSort bool) {
	if len(c.data) == 0 {
		if c.err == nil {
			c.err = errEmpty
		}
		return
	}
	if doSort && !c.sorted {
		partialSortInPlace(c, len(c.data))
	}
	maxl := c.data[0].logit
	if !c.sorted {
		for i := 1; i < len(c.data); i++ {
			maxl = fmax(maxl, c.data[i].logit)
		}
	}
	var sum float32
	for i := range c.data {
		p := expf(c.data[i].logit - maxl)
		c.data[i].p = p
		sum += p
	}
	for i := range c.data {
		c.data[i].p /= sum
	}
}

// tempImpl is llama_sampler_temp_impl.
func tempImpl(c *candidates, temp float32) {
	if len(c.data) == 0 {
		return
	}
	if temp <= 0 {
		maxi := 0
		maxl := c.data[0].logit
		for i := 1; i < len(c.data); i++ {
			if c.data[i].logit > maxl {
				c.data[maxi].logit = negInf
				maxi = i
				maxl = c.data[i].logit
			} else {
				c.data[i].logit = negInf
			}
		}
		return
	}
	for i := range c.data {
		c.data[i].logit /= temp
	}
}

// topKImpl is llama_sampler_top_k_impl.
func topKImpl(c *candidates, k int) {
	if k <= 0 {
		return
	}
	k = min(k, len(c.data))
	if !c.sorted {
		partialSortInPlace(c, k)
	}
	c.data = c.data[:k]
}
