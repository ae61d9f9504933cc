//go:build race

package httpapi_test

// raceOn: the race detector's run checks the concurrent paths (closed
// connections, stalled clients, the soak, the fuzz seeds); the
// comparisons with llama-server and its clients run without it.
const raceOn = true
