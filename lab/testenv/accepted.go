package testenv

import (
	"strings"
	"time"
)

// Accepted is how many client connections the server has accepted so
// far, once its output has settled: the count is read until it stays the
// same for 100 ms (the server prints a line as it accepts, before it
// serves the connection), within 5 s.
func (s *RPCServer) Accepted() int {
	count := func() int { return strings.Count(s.Output(), "Accepted client connection") }
	n, since := count(), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if m := count(); m != n {
			n, since = m, time.Now()
		} else if time.Since(since) >= 100*time.Millisecond {
			break
		}
	}
	return n
}
