//go:build race

package serve_test

// raceOn: the race detector's run checks the concurrent paths (faults,
// concurrent requests, batching); the comparisons with llama-server run
// without it.
const raceOn = true
