package ggload_test

import (
	"testing"

	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
