// Port of libstdc++'s std::sort and std::partial_sort, whose orders of
// equal elements llama.cpp src/llama-sampler.cpp (v0.5.0) returns.

package sample

import "math/bits"

// The orders of equal elements that std::sort and std::partial_sort leave
// are part of what the samplers return, so these are libstdc++'s
// algorithms step for step: introsort with a median-of-three pivot, an
// insertion sort below 16 elements, and the heap select of partial_sort.

const sortThreshold = 16

type lessFunc[T any] func(a, b *T) bool

// stdSort is std::sort(a.begin(), a.end(), less).
func stdSort[T any](a []T, less lessFunc[T]) {
	n := len(a)
	if n == 0 {
		return
	}
	introsortLoop(a, 0, n, 2*(bits.Len(uint(n))-1), less)
	finalInsertionSort(a, 0, n, less)
}

// stdPartialSort is std::partial_sort(a, a+middle, a+len(a), less).
func stdPartialSort[T any](a []T, middle int, less lessFunc[T]) {
	partialSort(a, 0, middle, len(a), less)
}

func introsortLoop[T any](a []T, first, last, depth int, less lessFunc[T]) {
	for last-first > sortThreshold {
		if depth == 0 {
			partialSort(a, first, last, last, less)
			return
		}
		depth--
		cut := partitionPivot(a, first, last, less)
		introsortLoop(a, cut, last, depth, less)
		last = cut
	}
}

func partitionPivot[T any](a []T, first, last int, less lessFunc[T]) int {
	mid := first + (last-first)/2
	moveMedianToFirst(a, first, first+1, mid, last-1, less)
	return unguardedPartition(a, first+1, last, first, less)
}

func moveMedianToFirst[T any](a []T, result, x, y, z int, less lessFunc[T]) {
	var m int
	switch {
	case less(&a[x], &a[y]):
		switch {
		case less(&a[y], &a[z]):
			m = y
		case less(&a[x], &a[z]):
			m = z
		default:
			m = x
		}
	case less(&a[x], &a[z]):
		m = x
	case less(&a[y], &a[z]):
		m = z
	default:
		m = y
	}
	a[result], a[m] = a[m], a[result]
}

func unguardedPartition[T any](a []T, first, last, pivot int, less lessFunc[T]) int {
	for {
		for less(&a[first], &a[pivot]) {
			first++
		}
		last--
		for less(&a[pivot], &a[last]) {
			last--
		}
		if first >= last {
			return first
		}
		a[first], a[last] = a[last], a[first]
		first++
	}
}

func finalInsertionSort[T any](a []T, first, last int, less lessFunc[T]) {
	if last-first > sortThreshold {
		insertionSort(a, first, first+sortThreshold, less)
		for i := first + sortThreshold; i < last; i++ {
			linearInsert(a, i, less)
		}
		return
	}
	insertionSort(a, first, last, less)
}

func insertionSort[T any](a []T, first, last int, less lessFunc[T]) {
	if first == last {
		return
	}
	for i := first + 1; i < last; i++ {
		if less(&a[i], &a[first]) {
			v := a[i]
			copy(a[first+1:i+1], a[first:i])
			a[first] = v
		} else {
			linearInsert(a, i, less)
		}
	}
}

// linearInsert is __unguarded_linear_insert.
func linearInsert[T any](a []T, last int, less lessFunc[T]) {
	v := a[last]
	next := last - 1
	for less(&v, &a[next]) {
		a[last] = a[next]
		last = next
		next--
	}
	a[last] = v
}

func partialSort[T any](a []T, first, middle, last int, less lessFunc[T]) {
	makeHeap(a, first, middle, less)
	for i := middle; i < last; i++ {
		if less(&a[i], &a[first]) {
			popHeap(a, first, middle, i, less)
		}
	}
	for middle-first > 1 {
		middle--
		popHeap(a, first, middle, middle, less)
	}
}

func makeHeap[T any](a []T, first, last int, less lessFunc[T]) {
	n := last - first
	if n < 2 {
		return
	}
	for parent := (n - 2) / 2; ; parent-- {
		v := a[first+parent]
		adjustHeap(a, first, parent, n, v, less)
		if parent == 0 {
			return
		}
	}
}

func popHeap[T any](a []T, first, last, result int, less lessFunc[T]) {
	v := a[result]
	a[result] = a[first]
	adjustHeap(a, first, 0, last-first, v, less)
}

func adjustHeap[T any](a []T, first, hole, n int, v T, less lessFunc[T]) {
	top := hole
	child := hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if less(&a[first+child], &a[first+child-1]) {
			child--
		}
		a[first+hole] = a[first+child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		a[first+hole] = a[first+child-1]
		hole = child - 1
	}
	parent := (hole - 1) / 2
	for hole > top && less(&a[first+parent], &v) {
		a[first+hole] = a[first+parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	a[first+hole] = v
}
