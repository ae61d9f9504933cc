package loader

import (
	"fmt"

	"github.com/ggload/ggload/ggml"
)

// bounceMemory maps n bytes of memory outside Go's heap for a bounce
// buffer: freed at once when the load is done with it (the resident size
// comes back after a load), and, when the system refuses it (an address
// space limit, say), an error wrapping ggml.ErrOutOfMemory instead of the Go
// runtime's fatal out-of-memory.
func bounceMemory(n int64, what string) ([]byte, error) {
	if n <= 0 {
		return nil, nil
	}
	b, err := anonMap(int(n))
	if err != nil {
		return nil, fmt.Errorf("loader: cannot map %d bytes (%.2f MiB) of bounce memory for %s: %w: %w", n, float64(n)/(1<<20), what, err, ggml.ErrOutOfMemory)
	}
	return b, nil
}
