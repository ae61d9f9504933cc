//go:build race

package pool_test

// raceOn: the race detector's run checks the pool's concurrent paths;
// the comparisons with llama-server run without it.
const raceOn = true
