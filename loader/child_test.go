package loader_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// childEnv marks a test binary run by inChild.
const childEnv = "GGLOAD_TEST_CHILD"

// isChild reports whether this binary runs a test for inChild.
func isChild() bool { return os.Getenv(childEnv) == "1" }

// inChild runs the calling top-level test again in a child process (this
// test binary, through wrapper when given), so that a crash there (SIGBUS,
// SIGABRT) fails the test here instead of ending the whole binary. The test
// tells the two apart with isChild. It returns the child's output. A child
// that skipped makes the test skip with the child's reason; any other
// failure of the child fails the test with its output.
func inChild(t *testing.T, wrapper []string, env ...string) string {
	t.Helper()
	argv := append(append([]string{}, wrapper...), os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1", "-test.timeout=10m")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	s := string(out)
	if err != nil {
		t.Fatalf("the child process failed (%v); its output:\n%s", err, crashLines(s))
	}
	if reason, ok := childSkip(s, t.Name()); ok {
		t.Skipf("skipped in the child process: %s", reason)
	}
	if !strings.Contains(s, "--- PASS: "+t.Name()) {
		t.Fatalf("the child process did not report %s as passed; its output:\n%s", t.Name(), lastLines(s, 60))
	}
	return s
}

// childSkip finds the reason a test skipped in go test -v output: the
// last message it logged before its "--- SKIP" line (go test streams the
// messages of a -v run as they come).
func childSkip(out, name string) (string, bool) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "--- SKIP: "+name+" (") {
			continue
		}
		// the message starts at the last line indented by four
		// spaces; deeper lines continue it
		start := -1
		for j := i - 1; j >= 0 && strings.HasPrefix(lines[j], "    "); j-- {
			if !strings.HasPrefix(lines[j], "        ") {
				start = j
				break
			}
		}
		if start < 0 {
			return "", true
		}
		var why []string
		for _, m := range lines[start:i] {
			why = append(why, strings.TrimSpace(m))
		}
		return strings.Join(why, " "), true
	}
	return "", false
}

// crashLines picks from a child's output what tells a crash: the signal or
// panic and the first frames after it, then the last lines.
func crashLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "SIG") || strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") || strings.Contains(l, "GGML_ASSERT") || strings.Contains(l, "GGML_ABORT") {
			return strings.Join(lines[i:min(i+30, len(lines))], "\n") + "\n...\n" + lastLines(s, 20)
		}
	}
	return lastLines(s, 60)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestChildSkipIsASkip: a child that skips is reported as a skip with the
// child's reason, and its reason is found in go test's output.
func TestChildSkipIsASkip(t *testing.T) {
	out := "=== RUN   TestX\n    faults_test.go:10: model written\n    faults_test.go:12: vulkan missing: no Vulkan device\n--- SKIP: TestX (0.00s)\nPASS\n"
	if why, ok := childSkip(out, "TestX"); !ok || why != "faults_test.go:12: vulkan missing: no Vulkan device" {
		t.Fatalf("childSkip = %q, %v", why, ok)
	}
	if _, ok := childSkip("--- PASS: TestX (0.00s)\n", "TestX"); ok {
		t.Fatal("a pass read as a skip")
	}
	if _, ok := childSkip("--- SKIP: TestXY (0.00s)\n", "TestX"); ok {
		t.Fatal("another test's skip read as this one's")
	}
}
