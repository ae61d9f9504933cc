package testenv

import "testing"

// A child that skips is reported with its reason; a pass or another test's
// skip is not a skip.
func TestChildSkip(t *testing.T) {
	out := "=== RUN   TestX\n    faults_test.go:10: model written\n    faults_test.go:12: vulkan missing: no Vulkan device\n--- SKIP: TestX (0.00s)\nPASS\n"
	if why, ok := ChildSkip(out, "TestX"); !ok || why != "faults_test.go:12: vulkan missing: no Vulkan device" {
		t.Fatalf("ChildSkip = %q, %v", why, ok)
	}
	if _, ok := ChildSkip("--- PASS: TestX (0.00s)\n", "TestX"); ok {
		t.Fatal("a pass read as a skip")
	}
	if _, ok := ChildSkip("--- SKIP: TestXY (0.00s)\n", "TestX"); ok {
		t.Fatal("another test's skip read as this one's")
	}
}
