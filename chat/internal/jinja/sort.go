// The sort and dictsort filters call std::sort, which is not stable: the
// order it leaves equal elements in is its algorithm's. This is
// libstdc++'s (introsort, median of three, heap sort past the depth
// limit, a final insertion sort), step for step, so that ties come out as
// they do in llama.cpp. The pin's comparator may be inconsistent (mixed
// types, NaN); where libstdc++'s unguarded loops would then run off the
// range, Go's bounds check stops them with an error instead.

package jinja

import "math/bits"

const sortThreshold = 16

func stdSort[T any](s []T, less func(a, b T) bool) {
	if len(s) < 2 {
		return
	}
	depth := 2 * (63 - bits.LeadingZeros64(uint64(len(s))))
	introsortLoop(s, 0, len(s), depth, less)
	finalInsertionSort(s, 0, len(s), less)
}

func introsortLoop[T any](s []T, first, last, depth int, less func(a, b T) bool) {
	for last-first > sortThreshold {
		if depth == 0 {
			heapSelect(s, first, last, less)
			sortHeap(s, first, last, less)
			return
		}
		depth--
		cut := partitionPivot(s, first, last, less)
		introsortLoop(s, cut, last, depth, less)
		last = cut
	}
}

func partitionPivot[T any](s []T, first, last int, less func(a, b T) bool) int {
	mid := first + (last-first)/2
	moveMedianToFirst(s, first, first+1, mid, last-1, less)
	return unguardedPartition(s, first+1, last, first, less)
}

func moveMedianToFirst[T any](s []T, result, a, b, c int, less func(a, b T) bool) {
	swap := func(i, j int) { s[i], s[j] = s[j], s[i] }
	switch {
	case less(s[a], s[b]):
		switch {
		case less(s[b], s[c]):
			swap(result, b)
		case less(s[a], s[c]):
			swap(result, c)
		default:
			swap(result, a)
		}
	case less(s[a], s[c]):
		swap(result, a)
	case less(s[b], s[c]):
		swap(result, c)
	default:
		swap(result, b)
	}
}

func unguardedPartition[T any](s []T, first, last, pivot int, less func(a, b T) bool) int {
	for {
		for less(s[first], s[pivot]) {
			first++
		}
		last--
		for less(s[pivot], s[last]) {
			last--
		}
		if !(first < last) {
			return first
		}
		s[first], s[last] = s[last], s[first]
		first++
	}
}

func finalInsertionSort[T any](s []T, first, last int, less func(a, b T) bool) {
	if last-first > sortThreshold {
		insertionSort(s, first, first+sortThreshold, less)
		for i := first + sortThreshold; i != last; i++ {
			unguardedLinearInsert(s, i, less)
		}
		return
	}
	insertionSort(s, first, last, less)
}

func insertionSort[T any](s []T, first, last int, less func(a, b T) bool) {
	if first == last {
		return
	}
	for i := first + 1; i != last; i++ {
		if less(s[i], s[first]) {
			v := s[i]
			copy(s[first+1:i+1], s[first:i])
			s[first] = v
		} else {
			unguardedLinearInsert(s, i, less)
		}
	}
}

func unguardedLinearInsert[T any](s []T, last int, less func(a, b T) bool) {
	v := s[last]
	next := last - 1
	for less(v, s[next]) {
		s[last] = s[next]
		last = next
		next--
	}
	s[last] = v
}

func heapSelect[T any](s []T, first, last int, less func(a, b T) bool) {
	// middle == last in __partial_sort's call: only the heap is built
	n := last - first
	if n < 2 {
		return
	}
	for parent := (n - 2) / 2; ; parent-- {
		adjustHeap(s, first, parent, n, s[first+parent], less)
		if parent == 0 {
			return
		}
	}
}

func sortHeap[T any](s []T, first, last int, less func(a, b T) bool) {
	for last-first > 1 {
		last--
		v := s[last]
		s[last] = s[first]
		adjustHeap(s, first, 0, last-first, v, less)
	}
}

func adjustHeap[T any](s []T, first, hole, n int, v T, less func(a, b T) bool) {
	top := hole
	second := hole
	for second < (n-1)/2 {
		second = 2 * (second + 1)
		if less(s[first+second], s[first+second-1]) {
			second--
		}
		s[first+hole] = s[first+second]
		hole = second
	}
	if n&1 == 0 && second == (n-2)/2 {
		second = 2 * (second + 1)
		s[first+hole] = s[first+second-1]
		hole = second - 1
	}
	parent := (hole - 1) / 2
	for hole > top && less(s[first+parent], v) {
		s[first+hole] = s[first+parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	s[first+hole] = v
}
