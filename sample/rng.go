// Port of libstdc++'s std::mt19937 and the distributions llama.cpp
// src/llama-sampler.cpp (v0.5.0) draws with.

package sample

import (
	"crypto/rand"
	"encoding/binary"
	"math"
)

// DefaultSeed is LLAMA_DEFAULT_SEED: a sampler given it draws a random
// seed of its own, as llama.cpp's get_rng_seed does.
const DefaultSeed uint32 = 0xFFFFFFFF

// mt19937 is the 32-bit Mersenne Twister of std::mt19937.
type mt19937 struct {
	mt  [624]uint32
	idx int
}

func (m *mt19937) seed(s uint32) {
	m.mt[0] = s
	for i := 1; i < 624; i++ {
		p := m.mt[i-1]
		m.mt[i] = 1812433253*(p^(p>>30)) + uint32(i)
	}
	m.idx = 624
}

func (m *mt19937) next() uint32 {
	if m.idx >= 624 {
		const upper, lower = 0x80000000, 0x7fffffff
		for i := 0; i < 624; i++ {
			y := m.mt[i]&upper | m.mt[(i+1)%624]&lower
			v := m.mt[(i+397)%624] ^ y>>1
			if y&1 != 0 {
				v ^= 0x9908b0df
			}
			m.mt[i] = v
		}
		m.idx = 0
	}
	y := m.mt[m.idx]
	m.idx++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	y ^= y >> 18
	return y
}

// canonical64 is std::generate_canonical<double, 53> as libstdc++ computes
// it over a 32-bit engine: two draws, the first the low word.
func (m *mt19937) canonical64() float64 {
	sum := float64(m.next())
	sum += float64(m.next()) * 4294967296.0
	r := sum / 18446744073709551616.0
	if r >= 1 {
		r = math.Nextafter(1, 0)
	}
	return r
}

// canonical32 is std::generate_canonical<float, 24>: one draw.
func (m *mt19937) canonical32() float32 {
	sum := float32(m.next())
	r := sum / 4294967296.0
	if r >= 1 {
		r = math.Nextafter32(1, 0)
	}
	return r
}

// rngSeed is get_rng_seed: DefaultSeed stands for a random one.
func rngSeed(s uint32) uint32 {
	if s != DefaultSeed {
		return s
	}
	var b [4]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// sampleDiscrete is std::discrete_distribution<int> over the candidates'
// probabilities followed by one draw, as llama_sample_dist does: fewer
// than two weights draw nothing and give 0.
func sampleDiscrete(c *candidates, rng *mt19937) int {
	n := len(c.data)
	if n < 2 {
		return 0
	}
	var sum float64
	for i := range c.data {
		sum += float64(c.data[i].p)
	}
	cp := make([]float64, n)
	var acc float64
	for i := range c.data {
		acc += float64(c.data[i].p) / sum
		cp[i] = acc
	}
	cp[n-1] = 1
	u := rng.canonical64()
	// std::lower_bound: the first element not less than u
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if cp[mid] < u {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
