package main

import (
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

func parseText(t testing.TB, src string) (string, error) {
	t.Helper()
	toks, err := lex(src, 1)
	if err != nil {
		return "", err
	}
	n, err := parseBody("test.cpp", append(toks, token{k: tEOF}))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, k := range n.Kids {
		ast.Encode(&b, k)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// Each construct of the pin's code reads into the node the evaluator
// runs.
func TestParse(t *testing.T) {
	cases := []struct{ src, want string }{
		{`int x = 1 + 2 * 3;`, `(decl "x" :i32 (bin "+" 1 (bin "*" 2 3)))`},
		{`const auto & hp = model.hparams;`, `(decl "hp" :ref (mem "hparams" model))`},
		{`uint32_t a = 1, b;`, "(decl \"a\" :u32 1)\n(decl \"b\" :u32)"},
		{`if (a && !b) { x = 1; } else y += 2;`, `(if (nil) (bin "&&" a (un "!" b)) (block (expr (set "=" x 1))) (expr (set "+=" y 2)))`},
		{`for (int i = 0; i < n; ++i) {}`, `(for (decl "i" :i32 0) (bin "<" i n) (un "pre++" i) (block))`},
		{`for (const auto & t : ts) { f(t); }`, `(range "t" :ref ts (block (expr (call f t))))`},
		{`while (n > 0) n--;`, `(for (nil) (bin ">" n 0) (nil) (expr (un "post--" n)))`},
		{`switch (a) { case 1: case 2: x = 3; break; default: x = 4; }`, `(switch a (case 1) (case 2 (expr (set "=" x 3)) (break)) (case (nil) (expr (set "=" x 4))))`},
		{`return c ? a : b;`, `(return (cond c a b))`},
		{`x = (float) y;`, `(expr (set "=" x (cast :f32 y)))`},
		{`x = static_cast<int64_t>(y);`, `(expr (set "=" x (cast :i64 y)))`},
		{`x = float(y);`, `(expr (set "=" x (cast :f32 y)))`},
		{`auto f = [&](int k) -> int { return k; };`, `(decl "f" (lambda (block (decl "k" :i32)) (block (return k))))`},
		{`std::vector<int> v = {1, 2};`, `(decl "v" :obj @"std::vector<int>" (list 1 2))`},
		{`static const std::regex re("a\\.b");`, `(decl "re" :obj @"std::regex" (list "a\\.b"))`},
		{`throw std::runtime_error("bad");`, `(throw (call std::runtime_error "bad"))`},
		{`try { f(); } catch (const std::exception & e) { g(); }`, `(try (block (expr (call f))) (block (expr (call g))))`},
		{`auto * p = new llama_kv_cache(a, b);`, `(decl "p" :ptr (call new::llama_kv_cache a b))`},
		{`x = a->b.c[2];`, `(expr (set "=" x (idx (mem "c" (mem "b" a)) 2)))`},
		{`x = 'a';`, `(expr (set "=" x 97))`},
		{`x = 0x10u + 1.5f;`, `(expr (set "=" x (bin "+" 16 (cast :f32 1.5))))`},
		{`x = 2.5;`, `(expr (set "=" x 2.5))`},
		{`[[fallthrough]];`, ``},
		{`if constexpr (e) {}`, `(if (nil) e (block) (nil))`},
		{`if (auto it = m.find(k); it != m.end()) {}`, `(if (decl "it" (call (mem "find" m) k)) (bin "!=" it (call (mem "end" m))) (block) (nil))`},
		// the split state's constructs
		{`struct cfg { int a; uint32_t b; }; auto f = [&]() -> cfg { return {1, 2}; };`,
			`(decl "f" (lambda (block) (block (return (list @"cfg:a,b" (cast :i32 1) (cast :u32 2))))))`},
		{`ggml_backend_meta_split_state st;`, `(decl "st" @"ggml_backend_meta_split_state")`},
		{`llama_context_params p = {1, 2};`, `(decl "p" @"llama_context_params" (list 1 2))`},
		{`memset(&st, 0, sizeof(st));`, `(expr (call memset (un "&" st) 0 (call sizeof st)))`},
		{`return std::vector<int64_t>(n, g);`, `(return (call std::vector n g))`},
		// the graph builders' constructs
		{`auto [q, k] = f(x);`, "(decl \"__bind1\" (call f x))\n(decl \"q\" (idx __bind1 0))\n(decl \"k\" (idx __bind1 1))"},
		{`for (const auto & [a, b] : m) { g(a, b); }`,
			`(range "__bind1" :ref m (block (decl "a" :ref (idx __bind1 0)) (decl "b" :ref (idx __bind1 1)) (block (expr (call g a b)))))`},
		{`using inp_t = std::conditional_t<embed, A, B>; inp_t * inp = nullptr;`, `(decl "inp" :ptr nullptr)`},
		{`do { n++; } while (n < 3);`, "(block (expr (un \"post++\" n)))\n(for (nil) (bin \"<\" n 3) (nil) (block (expr (un \"post++\" n))))"},
		{`auto * inp = (llm_graph_input_attn_kv *) x;`, `(decl "inp" :ptr (cast :ptr x))`},
		{`auto g = (llama_expert_gating_func_type) x;`, `(decl "g" (cast x))`},
		{`return std::make_unique<graph<false>>(*this, params);`, `(return (call new::graph<false> (un "*" this) params))`},
		{`auto r = std::make_unique<llm_graph_result>(n);`, `(decl "r" (call new::llm_graph_result n))`},
		{`ggml_tensor * cur_experts[LLAMA_MAX_EXPERTS] = { nullptr };`, `(decl "cur_experts" :ptr @"array" LLAMA_MAX_EXPERTS (list nullptr))`},
		{`int a[4];`, `(decl "a" :i32 @"array" 4)`},
	}
	for _, c := range cases {
		got, err := parseText(t, c.src)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if want := c.want; strings.TrimSpace(got) != want {
			t.Errorf("%s\n got %s\nwant %s", c.src, strings.TrimSpace(got), want)
		}
	}
}

// What the subset leaves out is an error naming the line, never a guess.
func TestParseRefuses(t *testing.T) {
	for _, src := range []string{
		`goto end;`,
		`x = a.template f<int>();`,
		`std::vector<int> f;  x = std::vector<int>;`,
		`struct s { int a; }; auto f = [&]() -> s { return {1, 2}; };`,
		`switch (a) { x = 1; }`,
		`{ x = 1;`,
		`x = ;`,
	} {
		if got, err := parseText(t, src); err == nil {
			t.Errorf("%s parsed as %s", src, got)
		} else if !strings.Contains(err.Error(), "test.cpp:") {
			t.Errorf("%s: %v names no line", src, err)
		}
	}
}

// The parser never panics, whatever the tokens: it returns a parse error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`int x = 1;`, `auto f = [&](int k) -> cfg { return {k}; };`, `switch (a) { case 1: break; }`,
		`if (a) { b(); } else { c(); }`, `for (auto & x : v) { x += 1; }`, `static const std::regex re("a");`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		parseText(t, src) // an error is fine; a panic fails
	})
}

// The branches of conditionals that the release build leaves out are not
// read: #if 0, #ifndef NDEBUG, a platform the build is not; a condition
// the preprocessor could not evaluate is refused.
func TestConditionals(t *testing.T) {
	cases := []struct{ src, want string }{
		{"#if 0\nx = 1;\n#else\nx = 2;\n#endif\n", `(expr (set "=" x 2))`},
		{"#if 1\nx = 1;\n#else\nx = 2;\n#endif\n", `(expr (set "=" x 1))`},
		{"#ifndef NDEBUG\ncheck();\n#endif\nx = 3;\n", `(expr (set "=" x 3))`},
		{"#if defined(_WIN32) && !defined(__clang__)\nx = 1;\n#elif defined(__linux__)\nx = 2;\n#else\nx = 3;\n#endif\n", `(expr (set "=" x 2))`},
		{"#if __cplusplus >= 202000L\nx = 1;\n#else\nx = \"#if\";\n#endif\n", `(expr (set "=" x "#if"))`},
		{"#if 0\n#if defined(X)\nx = 1;\n#endif\n#endif\ny = 1;\n", `(expr (set "=" y 1))`},
	}
	for _, c := range cases {
		got, err := parseText(t, c.src)
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if strings.TrimSpace(got) != c.want {
			t.Errorf("%q:\n got  %s\n want %s", c.src, got, c.want)
		}
	}
	for _, src := range []string{"#if FOO(1)\n#endif\n", "#endif\n", "#else\n", "#if (1\n#endif\n"} {
		if _, err := lex(src, 1); err == nil {
			t.Errorf("%q: no error", src)
		}
	}
}
