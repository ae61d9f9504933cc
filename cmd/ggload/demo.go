package main

import (
	"context"
	"io"
)

// runDemo is the embedded demo. Until the loader exists it shows the
// devices the demo would load onto.
func runDemo(ctx context.Context, stdout io.Writer) error {
	return runDevices(ctx, nil, stdout)
}
