package testenv

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// childEnv marks a test binary started by InChild.
const childEnv = "GGLOAD_TEST_CHILD"

// IsChild reports whether this test binary was started by InChild.
func IsChild() bool { return os.Getenv(childEnv) == "1" }

// InChild runs the calling top-level test again in a child process (this
// test binary, through wrapper when one is given), so that a crash there
// (SIGBUS, SIGABRT from a native assertion) fails the test here instead of
// ending the whole binary. The test tells the two runs apart with IsChild.
// It returns the child's output. A child that skipped makes the test skip
// with the child's reason; any other failure of the child fails the test
// with what tells the crash and the end of its output.
func InChild(t *testing.T, wrapper []string, env ...string) string {
	t.Helper()
	argv := append(append([]string{}, wrapper...), os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1", "-test.timeout=10m")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	s := string(out)
	if err != nil {
		t.Fatalf("the child process failed (%v); its output:\n%s", err, crashLines(s))
	}
	if reason, ok := ChildSkip(s, t.Name()); ok {
		t.Skipf("skipped in the child process: %s", reason)
	}
	if !strings.Contains(s, "--- PASS: "+t.Name()) {
		t.Fatalf("the child process did not report %s as passed; its output:\n%s", t.Name(), lastLines(s, 60))
	}
	return s
}

// ChildSkip finds the reason the named test skipped in go test -v output:
// the last message it logged before its "--- SKIP" line (go test streams
// the messages of a -v run as they come).
func ChildSkip(out, name string) (string, bool) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "--- SKIP: "+name+" (") {
			continue
		}
		// the message starts at the last line indented by four spaces;
		// deeper lines continue it
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

// crashLines picks from a child's output what tells a crash: the signal,
// panic or native assertion and the lines after it, then the last lines.
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
