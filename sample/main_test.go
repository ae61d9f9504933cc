package sample

import (
	"testing"

	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestMT19937 holds the engine to the value the C++ standard requires of
// std::mt19937: the 10000th output of a default-constructed engine
// (seed 5489) is 4123659995.
func TestMT19937(t *testing.T) {
	var m mt19937
	m.seed(5489)
	var v uint32
	for range 10000 {
		v = m.next()
	}
	if v != 4123659995 {
		t.Fatalf("10000th output %d, want 4123659995", v)
	}
}
