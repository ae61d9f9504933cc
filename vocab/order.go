// Port of libstdc++'s std::hash<std::string>, std::unordered_map's
// iteration order and std::sort's order of equal elements, as llama.cpp
// src/llama-vocab.cpp (v0.5.0) depends on them.

package vocab

import (
	"encoding/binary"
	"math/bits"
)

// This file reproduces two orders of libstdc++ that the pin's load depends
// on: the iteration order of its std::unordered_map of token texts, where
// the first of several matching texts picks a special token, and the
// order std::sort leaves tokens of equal length in cache_special_tokens,
// which decides between overlapping special tokens.

// stdHash is libstdc++'s std::hash<std::string> on 64-bit targets
// (_Hash_bytes with its fixed seed).
func stdHash(s string) uint64 {
	const mul = 0xc6a4a7935bd1e995
	shift := func(v uint64) uint64 { return v ^ (v >> 47) }
	n := len(s)
	h := uint64(0xc70f6907) ^ (uint64(n) * mul)
	aligned := n &^ 7
	for i := 0; i < aligned; i += 8 {
		d := shift(binary.LittleEndian.Uint64([]byte(s[i:i+8]))*mul) * mul
		h ^= d
		h *= mul
	}
	if n&7 != 0 {
		var d uint64
		for i := n - 1; i >= aligned; i-- {
			d = d<<8 + uint64(s[i])
		}
		h ^= d
		h *= mul
	}
	h = shift(h) * mul
	return shift(h)
}

// primes is the part of libstdc++'s prime list that its rehash policy
// reaches when a table grows by insertion from empty: each entry is the
// first listed prime not below twice the one before.
var primes = []uint64{
	13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229,
	172933, 351061, 712697, 1447153, 2938679, 5967347, 12117689, 24607243,
	49969847, 101473717, 206062531, 418451333, 849749479, 1725587117,
	3504151727, 8589934583, 25769803693, 68719476731,
}

// hashOrder returns, for each token id, its position in the iteration
// order of llama.cpp's token_to_id map after inserting the texts in id
// order (the keys; for hybriddna the k-mer keys keep their marker).
func hashOrder(texts []string, hybrid bool, toID map[string]Token) []int32 {
	n := len(texts)
	hs := make([]uint64, n)
	for i, t := range texts {
		if hybrid {
			if id, ok := toID[t]; !ok || int(id) != i {
				t += dnaMarker
			}
		}
		hs[i] = stdHash(t)
	}
	const none = -1
	bb := int32(n) // the list head ("before begin")
	next := make([]int32, n+1)
	next[bb] = none
	nb := uint64(1)
	buckets := []int32{none}
	nextResize := uint64(0)
	growth := 0
	rehash := func(count uint64) {
		nbk := make([]int32, count)
		for i := range nbk {
			nbk[i] = none
		}
		p := next[bb]
		next[bb] = none
		bbegin := uint64(0)
		for p != none {
			q := next[p]
			b := hs[p] % count
			if nbk[b] == none {
				next[p] = next[bb]
				next[bb] = p
				nbk[b] = bb
				if next[p] != none {
					nbk[bbegin] = p
				}
				bbegin = b
			} else {
				next[p] = next[nbk[b]]
				next[nbk[b]] = p
			}
			p = q
		}
		buckets, nb = nbk, count
	}
	for i := range n {
		elems := uint64(i)
		if elems+1 > nextResize {
			minB := elems + 1
			if nextResize == 0 && minB < 11 {
				minB = 11
			}
			if minB >= nb {
				count := primes[growth]
				for count < max(minB+1, nb*2) {
					growth++
					count = primes[growth]
				}
				growth++
				nextResize = count
				rehash(count)
			} else {
				nextResize = nb
			}
		}
		b := hs[i] % nb
		node := int32(i)
		if buckets[b] != none {
			next[node] = next[buckets[b]]
			next[buckets[b]] = node
		} else {
			next[node] = next[bb]
			next[bb] = node
			if next[node] != none {
				buckets[hs[next[node]]%nb] = node
			}
			buckets[b] = bb
		}
	}
	rank := make([]int32, n)
	pos := int32(0)
	for p := next[bb]; p != none; p = next[p] {
		rank[p] = pos
		pos++
	}
	return rank
}

// stdSort sorts s as libstdc++'s std::sort does (introsort: median-of-three
// quicksort down to runs of 16, heapsort past the depth limit, then
// insertion sort), so that elements that compare equal end where the pin's
// end.
func stdSort(s []Token, less func(a, b Token) bool) {
	if len(s) < 2 {
		return
	}
	introLoop(s, 0, len(s), 2*(bits.Len(uint(len(s)))-1), less)
	finalInsertion(s, less)
}

const sortThreshold = 16

func introLoop(s []Token, first, last, depth int, less func(a, b Token) bool) {
	for last-first > sortThreshold {
		if depth == 0 {
			heapSort(s[first:last], less)
			return
		}
		depth--
		cut := partitionPivot(s, first, last, less)
		introLoop(s, cut, last, depth, less)
		last = cut
	}
}

func partitionPivot(s []Token, first, last int, less func(a, b Token) bool) int {
	mid := first + (last-first)/2
	medianToFirst(s, first, first+1, mid, last-1, less)
	// unguarded partition of [first+1, last) around s[first]
	lo, hi := first+1, last
	for {
		for less(s[lo], s[first]) {
			lo++
		}
		hi--
		for less(s[first], s[hi]) {
			hi--
		}
		if lo >= hi {
			return lo
		}
		s[lo], s[hi] = s[hi], s[lo]
		lo++
	}
}

func medianToFirst(s []Token, r, a, b, c int, less func(a, b Token) bool) {
	switch {
	case less(s[a], s[b]):
		switch {
		case less(s[b], s[c]):
			s[r], s[b] = s[b], s[r]
		case less(s[a], s[c]):
			s[r], s[c] = s[c], s[r]
		default:
			s[r], s[a] = s[a], s[r]
		}
	case less(s[a], s[c]):
		s[r], s[a] = s[a], s[r]
	case less(s[b], s[c]):
		s[r], s[c] = s[c], s[r]
	default:
		s[r], s[b] = s[b], s[r]
	}
}

func finalInsertion(s []Token, less func(a, b Token) bool) {
	if len(s) > sortThreshold {
		insertionSort(s[:sortThreshold], less)
		for i := sortThreshold; i < len(s); i++ {
			linearInsert(s, i, less)
		}
		return
	}
	insertionSort(s, less)
}

func insertionSort(s []Token, less func(a, b Token) bool) {
	for i := 1; i < len(s); i++ {
		if less(s[i], s[0]) {
			v := s[i]
			copy(s[1:i+1], s[:i])
			s[0] = v
		} else {
			linearInsert(s, i, less)
		}
	}
}

// linearInsert moves s[i] left past the elements greater than it, with no
// bound check (an element not greater stops it).
func linearInsert(s []Token, i int, less func(a, b Token) bool) {
	v := s[i]
	j := i - 1
	for less(v, s[j]) {
		s[j+1] = s[j]
		j--
	}
	s[j+1] = v
}

// heapSort is std::__partial_sort over the whole range: make_heap, then
// sort_heap.
func heapSort(s []Token, less func(a, b Token) bool) {
	n := len(s)
	if n < 2 {
		return
	}
	for parent := (n - 2) / 2; ; parent-- {
		adjustHeap(s, parent, n, s[parent], less)
		if parent == 0 {
			break
		}
	}
	for last := n - 1; last > 0; last-- {
		v := s[last]
		s[last] = s[0]
		adjustHeap(s, 0, last, v, less)
	}
}

func adjustHeap(s []Token, hole, n int, v Token, less func(a, b Token) bool) {
	top := hole
	child := hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if less(s[child], s[child-1]) {
			child--
		}
		s[hole] = s[child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		s[hole] = s[child-1]
		hole = child - 1
	}
	parent := (hole - 1) / 2
	for hole > top && less(s[parent], v) {
		s[hole] = s[parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	s[hole] = v
}
