//go:build race

package loader_test

// raceDetector: the test binary runs under the race detector, whose
// runtime keeps memory of its own for every thread and goroutine.
const raceDetector = true
