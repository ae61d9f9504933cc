package grammar

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/cxx"
)

// record is one question to the oracle program (testdata/oracle.cpp): a
// kind byte and its data.
type record struct {
	kind byte
	data string
}

// oracle runs the pin's libllama and libllama-common over the records
// (testdata/oracle.cpp) and returns its answers.
func oracle(t *testing.T, records []record) []string {
	t.Helper()
	return oracleWith(t, records)
}

// oracleWith is oracle with arguments for the program (a model for 'm').
func oracleWith(t *testing.T, records []record, args ...string) []string {
	t.Helper()
	src, err := filepath.Abs("testdata/oracle.cpp")
	if err != nil {
		t.Fatal(err)
	}
	bin := cxx.Build(t, "grammar-oracle", []string{src})
	var in bytes.Buffer
	for _, r := range records {
		fmt.Fprintf(&in, "%c%d\n%s", r.kind, len(r.data), r.data)
	}
	cmd := cxx.Command(t, bin, args...)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("grammar oracle: %v\n%s", err, tail(stderr.String()))
	}
	answers := strings.Split(string(out), "\n\x1e\n")
	if len(answers) != len(records)+1 {
		t.Fatalf("grammar oracle: %d answers to %d records\n%s", len(answers)-1, len(records), tail(stderr.String()))
	}
	return answers[:len(records)]
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// compareOracle asks the oracle and ours the same records and reports
// the first few differences; it returns how many records differed.
func compareOracle(t *testing.T, records []record, ours func(record) string) int {
	t.Helper()
	want := oracle(t, records)
	bad := 0
	for i, r := range records {
		got := ours(r)
		if got == want[i] {
			continue
		}
		bad++
		if bad <= 5 || os.Getenv("GGLOAD_GRAMMAR_VERBOSE") != "" {
			t.Errorf("record %c %q:\nours:\n%s\nthe pin's:\n%s", r.kind, trunc(r.data), trunc(got), trunc(want[i]))
		}
	}
	if bad > 5 {
		t.Errorf("... %d records differ in all", bad)
	}
	return bad
}

func trunc(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "..."
	}
	return s
}

// allCases says whether the whole of a suite runs (GGLOAD_GRAMMAR_ALL=1),
// or the default sample.
func allCases() bool { return os.Getenv("GGLOAD_GRAMMAR_ALL") == "1" }
