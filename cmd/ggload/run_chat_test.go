package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/vocab"
)

// ggload run in conversation mode prints what llama-completion -cnv
// prints, byte for byte, for the same standard input: the formatted
// prompt, each reply as it is generated, "> " before each turn read,
// "EOF by user" at the end of the input; with -sys, -p, -st, multi-line
// input, -n reached mid-reply, end-of-generation tokens (the reply then
// joins the conversation), Jinja and llama.cpp's built-in formats.
func TestRunChatMatchesLlamaCompletion(t *testing.T) {
	bin := cxx.Build(t, "llama-completion", []string{"tools/completion/completion.cpp", "tools/completion/main.cpp"})
	path := textModel(t, "llama", "qwen2") // Qwen2's vocabulary and chat template
	v, err := vocab.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	imEnd, err := v.Tokenize("<|im_end|>", false, true)
	if err != nil || len(imEnd) != 1 {
		t.Fatalf("<|im_end|>: %v %v", imEnd, err)
	}
	// an end-of-generation token now and then
	eog := fmt.Sprintf("%d+0.5", imEnd[0])
	dir := t.TempDir()
	tmplFile := filepath.Join(dir, "t.jinja")
	custom := "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"
	if err := os.WriteFile(tmplFile, []byte(custom), 0o644); err != nil {
		t.Fatal(err)
	}
	sysFile := filepath.Join(dir, "sys.txt")
	if err := os.WriteFile(sysFile, []byte("Be brief.\nVery brief.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args  []string
		stdin string
	}{
		{[]string{"-p", "Hello", "-st", "-n", "8", "--temp", "0"}, ""},
		{[]string{"-sys", "You are terse.", "-n", "12", "--temp", "0"}, "Hi\tthere\nSecond question\n"},
		{[]string{"-cnv", "-n", "5", "--temp", "0"}, "first\n\nsecond line\\\nand more\nreturn/\nlast"},
		{[]string{"-sysf", sysFile, "-st", "-n", "16", "--temp", "0"}, "one\ntwo\n"},
		{[]string{"-p", "chat", "-n", "24", "-s", "3", "-l", eog}, "again\nonce more\nand again\n"},
		{[]string{"-sys", "custom", "-n", "24", "-s", "7", "-l", eog, "--chat-template-file", tmplFile, "-sp"}, "x\ny\nz\n"},
		{[]string{"-p", "named", "-n", "24", "-s", "9", "-l", eog, "--chat-template", "llama3", "--no-jinja", "-sp"}, "a\nb\n"},
		{[]string{"-n", "4", "--temp", "0", "-sys", "long input", "-c", "64"}, strings.Repeat("word ", 40) + "\nok\n"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			jinja := "--jinja" // (llama-completion's default is --no-jinja, ggload's --jinja)
			for _, a := range c.args {
				if a == "--no-jinja" {
					jinja = "--no-jinja"
				}
			}
			args := append([]string{"-m", path, "-t", "2", "-dev", "none", "--simple-io", jinja}, c.args...)
			cmd := cxx.Command(t, bin, args...)
			cmd.Stdin = strings.NewReader(c.stdin)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			want, err := cmd.Output()
			if err != nil {
				t.Fatalf("llama-completion %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			chatStdin = strings.NewReader(c.stdin)
			defer func() { chatStdin = os.Stdin }()
			got, err := runCLI(t, append([]string{"run", path, "-t", "2", "-dev", "none", "--simple-io"}, c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("ggload run printed\n%q\nllama-completion printed\n%q", got, want)
			}
		})
	}
}

// --json prints no conversation: by default it runs the prompt as it is
// (-no-cnv), and with -cnv it is refused.
func TestRunChatOptions(t *testing.T) {
	path := textModel(t, "llama", "qwen2")
	if _, err := runCLI(t, "run", path, "-t", "2", "-dev", "none", "-p", "hi", "-n", "1", "--json"); err != nil {
		t.Fatalf("--json with a model's template: %v", err)
	}
	_, err := runCLI(t, "run", path, "-t", "2", "-dev", "none", "-p", "hi", "-n", "1", "--json", "-cnv")
	if err == nil || !strings.Contains(err.Error(), "--json takes -no-cnv") {
		t.Fatalf("-cnv --json: %v", err)
	}
	_, err = runCLI(t, "run", path, "-t", "2", "-dev", "none", "-sys", "x", "--chat-template", "{% for m in messages %}")
	if err == nil || !strings.Contains(err.Error(), "--chat-template:1:") || !strings.Contains(err.Error(), "Unexpected token type") {
		t.Fatalf("a template that does not parse: %v", err)
	}
}

// Conversation mode in a real terminal (tmux): the formatted prompt, "> ",
// the user's typing echoed by the terminal, the reply printed as it
// comes, Ctrl+D on an empty line ending it with "EOF by user", exit 0.
func TestRunChatInTerminal(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed (scripts/test.sh installs it)")
	}
	path := textModel(t, "llama", "qwen2")
	sock := fmt.Sprintf("ggload-chat-test-%d", os.Getpid())
	tm := func(args ...string) string {
		out, err := exec.Command(tmux, append([]string{"-L", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	script := fmt.Sprintf("env %s=1 %q run %q -t 2 -dev none -n 6 --temp 0 -sys 'You are terse.'; echo \"[exit $?]\"; sleep 60",
		asGgloadEnv, os.Args[0], path)
	tm("new-session", "-d", "-s", "chat", "-x", "160", "-y", "50", script)
	defer exec.Command(tmux, "-L", sock, "kill-server").Run()
	screen := func() string { return tm("capture-pane", "-p", "-t", "chat", "-S", "-200") }
	// (tmux drops the spaces that end a line: "> " waiting shows as ">")
	waitFor := func(what string, n int) string {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			s := screen()
			if strings.Count("\n"+s, "\n"+what) >= n {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %d × %q; the terminal shows:\n%s", n, what, s)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	s := waitFor(">", 1)
	if !strings.Contains(s, "system\nYou are terse.") {
		t.Fatalf("no system prompt before the first turn:\n%s", s)
	}
	tm("send-keys", "-t", "chat", "-l", "Hello there")
	tm("send-keys", "-t", "chat", "Enter")
	s = waitFor(">", 2)
	i, j := strings.Index(s, "> Hello there\n"), strings.LastIndex(s, "\n>")
	if i < 0 || j <= i+len("> Hello there\n") {
		t.Fatalf("no reply between the turns:\n%s", s)
	}
	tm("send-keys", "-t", "chat", "C-d")
	s = waitFor("[exit ", 1)
	t.Logf("the terminal showed:\n%s", strings.TrimRight(s, "\n"))
	if !strings.Contains(s, "> EOF by user") || !strings.Contains(s, "[exit 0]") {
		t.Fatalf("Ctrl+D did not end the conversation:\n%s", s)
	}
}
