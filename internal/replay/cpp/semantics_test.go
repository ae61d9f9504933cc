package cpp_test

import (
	"testing"

	"github.com/ggload/ggload/internal/replay/cpp"
)

// Statements as C++ runs them: scopes, loops, switch, try, and what
// stops each.
func TestStatements(t *testing.T) {
	checkValues(t, eval, []valueCase{
		{"an if's own variable", `(if (decl "y" :i32 3) (bin ">" y 2) (return y) (return 0))`, int64(3)},
		{"a return without a value", `(block (decl "f" (lambda (block) (block (return)))) (expr (call f)) (return 4))`, int64(4)},
		{"a for's condition ends it", `(block (decl "n" :i32 0) (for (nil) (bin "<" n 3) (un "post++" n) (block)) (return n))`, int64(3)},
		{"a return from a for", `(block (for (nil) 1 (nil) (return 4)) (return 0))`, int64(4)},
		{"continue in a switch continues the loop", `(block (decl "s" :i32 0)
			(for (decl "i" :i32 0) (bin "<" i 4) (un "pre++" i)
				(block (switch i (case 1 (continue)) (case (nil) (expr (set "+=" s i)))) (expr (set "+=" s 10))))
			(return s))`, int64(35)},
		{"a return from a switch", `(block (switch 2 (case 2 (return 9))) (return 0))`, int64(9)},
		{"a switch's case declares", `(block (decl "n" :i32 0) (switch 1 (case 1 (decl "y" :i32 5) (expr (set "=" n y)))) (return n))`, int64(5)},
		{"a switch that matches nothing", `(block (decl "n" :i32 3) (switch 5 (case 1 (expr (set "=" n 1)))) (return n))`, int64(3)},
		{"a switch on an enum", `(block (decl "n" :i32 0) (switch ENUM_A (case ENUM_A (expr (set "=" n 1)))) (return n))`, int64(1)},
		{"a range over a map", `(block (decl "m" :obj @"std::map<int, int>") (expr (call (mem "insert" m) 1 10)) (expr (call (mem "insert" m) 2 20)) (decl "s" :i32 0)
			(range "kv" :auto m (block (expr (set "+=" s (bin "*" (mem "first" kv) (mem "second" kv)))))) (return s))`, int64(50)},
		{"a range over a set", `(block (decl "m" :obj @"std::set<int>") (expr (call (mem "insert" m) 3)) (expr (call (mem "insert" m) 4)) (decl "s" :i32 0)
			(range "k" :i32 m (block (expr (set "+=" s k)))) (return s))`, int64(7)},
		{"a range by reference", `(block (decl "v" :obj @"std::vector<int>" (list 1 2)) (decl "s" :i32 0) (range "x" :ref v (block (expr (set "+=" s x)))) (return s))`, int64(3)},
		{"a range whose body empties its vector stops", `(block (decl "v" :obj @"std::vector<int>" (list 1 2 3)) (decl "s" :i32 0)
			(range "x" :i32 v (block (expr (set "+=" s x)) (expr (call (mem "clear" v))))) (return s))`, int64(1)},
		{"a range whose body empties its map stops", `(block (decl "m" :obj @"std::map<int, int>") (expr (set "=" (idx m 1) 1)) (expr (set "=" (idx m 2) 2)) (decl "s" :i32 0)
			(range "kv" :ref m (block (expr (set "+=" s (mem "second" kv))) (expr (call (mem "clear" m))))) (return s))`, int64(1)},
		{"a break from a range", `(block (decl "v" :obj @"std::vector<int>" (list 1 2 3)) (decl "s" :i32 0)
			(range "x" :i32 v (block (if (nil) (bin "==" x 2) (break) (nil)) (expr (set "+=" s x)))) (return s))`, int64(1)},
		{"a return from a range", `(block (decl "v" :obj @"std::vector<int>" (list 1 2 3)) (range "x" :i32 v (block (if (nil) (bin "==" x 2) (return x) (nil)))) (return 0))`, int64(2)},
		{"a try whose body ends normally", `(block (decl "n" :i32 0) (try (block (expr (set "=" n 1))) (block (expr (set "=" n 2)))) (return n))`, int64(1)},
		{"a variable declared where the scope's layout differs", `(block (decl "x" :i32 1) (if (nil) 0 (decl "y" :i32 2) (nil)) (decl "z" :i32 3) (return (bin "+" x z)))`, int64(4)},
		{"many variables in one scope", `(block (decl "a" :i32 1) (decl "b" :i32 2) (decl "c" :i32 3) (decl "d" :i32 4) (decl "e" :i32 5) (decl "f" :i32 6)
			(return (bin "+" (bin "+" (bin "+" a b) (bin "+" c d)) (bin "+" e f))))`, int64(21)},
	})
	checkErrors(t, eval, []errorCase{
		{"an if's init fails", `(if (decl "y" :i32 (call nothing)) 1 (return 1) (nil))`, "eval", "unknown function nothing"},
		{"an if's condition fails", `(if (nil) (call nothing) (return 1) (nil))`, "eval", "unknown function nothing"},
		{"a throw of a number", `(throw 5)`, "throw", "i32 5"},
		{"a throw's value fails", `(throw (call nothing))`, "eval", "unknown function nothing"},
		{"a try passes other errors on", `(try (block (expr (call nothing))) (block))`, "eval", "unknown function nothing"},
		{"an expression as a statement", `(block 5)`, "eval", "statement int"},
		{"a switch's value fails", `(switch (call nothing) (case 1 (break)))`, "eval", "unknown function nothing"},
		{"a switch's label fails", `(switch 1 (case (call nothing) (break)))`, "eval", "unknown function nothing"},
		{"a switch's case fails", `(switch 1 (case 1 (throw "in case")))`, "throw", "in case"},
		{"a for's init fails", `(for (decl "i" :i32 (call nothing)) (bin "<" i 2) (un "pre++" i) (block))`, "eval", "unknown function nothing"},
		{"a for's condition fails", `(for (nil) (call nothing) (nil) (block))`, "eval", "unknown function nothing"},
		{"a for's body fails", `(for (nil) 1 (nil) (throw "in loop"))`, "throw", "in loop"},
		{"a for's step fails", `(for (decl "i" :i32 0) (bin "<" i 2) (call nothing) (block))`, "eval", "unknown function nothing"},
		{"a range's collection fails", `(range "x" :i32 (call nothing) (block))`, "eval", "unknown function nothing"},
		{"a range's variable of the wrong type", `(block (decl "v" :obj @"std::vector<std::string>" (list "a")) (range "x" :i32 v (block)))`, "other", "cannot convert"},
		{"a range's body fails", `(block (decl "v" :obj @"std::vector<int>" (list 1)) (range "x" :i32 v (block (throw "in range"))))`, "throw", "in range"},
	})
}

// Declarations: C arrays, references, containers, structs, scalars.
func TestDeclarations(t *testing.T) {
	checkValues(t, eval, []valueCase{
		{"a reference to a temporary", `(block (decl "r" :ref (bin "+" 1 2)) (return r))`, int64(3)},
		{"a vector of n", `(block (decl "v" :obj @"std::vector<int>" (call std::vector 3)) (return (bin "+" (call (mem "size" v)) (idx v 2))))`, int64(3)},
		{"a vector of n copies", `(block (decl "v" :obj @"std::vector<uint32_t>" (call std::vector 2 (cast :u32 -1))) (return (idx v 1)))`, int64(4294967295)},
		{"a vector of pointers", `(block (decl "v" :obj @"std::vector<ggml_tensor *>" (call std::vector 2)) (return (bin "==" (idx v 1) nullptr)))`, int64(1)},
		{"a vector of floats", `(block (decl "v" :obj @"std::vector<double>" (call std::vector 2 1.5)) (return (idx v 1)))`, 1.5},
		{"an empty unique_ptr", `(block (decl "p" :obj @"std::unique_ptr<llama_memory_i>") (return (bin "==" p nullptr)))`, int64(1)},
		{"a shared_ptr of an object", `(block (decl "p" :obj @"std::shared_ptr<cfg>" GADGET) (return (call (mem "double" p) 4)))`, int64(8)},
		{"a container copied", `(block (decl "v" :obj @"std::vector<int>" (list 1 2)) (decl "w" :obj @"std::vector<int>" v) (expr (call (mem "push_back" v) 3))
			(return (call (mem "size" w))))`, int64(2)},
		{"a regex of a variable's pattern", `(block (decl "s" :str "a+") (decl "re" :obj @"std::regex" (list s)) (return (call std::regex_match "aaa" re)))`, int64(1)},
		{"the same regex twice", `(block (decl "r1" :obj @"std::regex" (list "x|y")) (decl "r2" :obj @"std::regex" (list "x|y")) (return (bin "==" r1 r2)))`, int64(1)},
		{"a struct assigned a brace list", `(block (decl "st" @"cfg") (expr (set "=" st (list 4 5))) (return (bin "+" (mem "a" st) (mem "b" st))))`, int64(9)},
		{"a struct assigned a short brace list", `(block (decl "st" @"cfg" (list 1 2)) (expr (set "=" st (list 4))) (return (bin "+" (mem "a" st) (mem "b" st))))`, int64(4)},
		{"a scalar from an empty brace list", `(block (decl "x" :i32 (list)) (return x))`, int64(0)},
		{"a scalar from a brace list", `(block (decl "x" :i32 (list 7)) (return x))`, int64(7)},
		{"a big literal is 64-bit", `(return (bin "*" 5000000000 2))`, int64(10000000000)},
		{"a string stream", `(block (decl "ss" :obj @"std::stringstream") (expr (bin "<<" (bin "<<" ss "n=") 5)) (expr (bin "<<" ss (list 1)))
			(return (call (mem "str" ss))))`, "n=5array"},
		{"an output string stream", `(block (decl "ss" :obj @"std::ostringstream") (return (call (mem "empty" (call (mem "str" ss))))))`, int64(1)},
		{"an array sized by a product", `(block (decl "v" :obj @"std::array<int, 2*FOUR>") (return (call (mem "size" v))))`, int64(8)},
		{"a map of a type the evaluator lacks holds anything", `(block (decl "m" :obj @"std::map<int, std::deque<int>>") (return (bin "==" (idx m 1) nullptr)))`, int64(1)},
		{"a struct with a float and a string", `(block (decl "st" @"fcfg" (list 1.5 "s")) (return (mem "s" st)))`, "s"},
	})
	checkErrors(t, eval, []errorCase{
		{"a C array's size fails", `(block (decl "a" :i32 @"array" (call nothing)) (return 0))`, "eval", "unknown function nothing"},
		{"a C array of a negative size", `(block (decl "a" :i32 @"array" -1) (return 0))`, "eval", "array a of i32 -1 elements"},
		{"a C array of too many initializers", `(block (decl "a" :i32 @"array" 1 (list 1 2)) (return 0))`, "eval", "(2 initializers)"},
		{"a C array's initializer fails", `(block (decl "a" :i32 @"array" 2 (list (call nothing))) (return 0))`, "eval", "unknown function nothing"},
		{"a C array's initializer of the wrong type", `(block (decl "a" :i32 @"array" 2 (list "x")) (return 0))`, "other", "cannot convert"},
		{"a reference to a temporary that fails", `(block (decl "r" :ref (call nothing)) (return 0))`, "eval", "unknown function nothing"},
		{"a vector of three arguments", `(block (decl "v" :obj @"std::vector<int>" (call std::vector 1 2 3)) (return 0))`, "eval", "std::vector<int>(3 arguments)"},
		{"a vector's size fails", `(block (decl "v" :obj @"std::vector<int>" (call std::vector (call nothing))) (return 0))`, "eval", "unknown function nothing"},
		{"a vector of a negative size", `(block (decl "v" :obj @"std::vector<int>" (call std::vector -1)) (return 0))`, "eval", "std::vector<int>(i64 -1)"},
		{"a vector of a string size", `(block (decl "v" :obj @"std::vector<int>" (call std::vector "x")) (return 0))`, "eval", `std::vector<int>(void)`},
		{"a vector's value fails", `(block (decl "v" :obj @"std::vector<int>" (call std::vector 1 (call nothing))) (return 0))`, "eval", "unknown function nothing"},
		{"a vector's value of the wrong type", `(block (decl "v" :obj @"std::vector<int>" (call std::vector 1 "x")) (return 0))`, "other", "cannot convert"},
		{"a unique_ptr's initializer fails", `(block (decl "p" :obj @"std::unique_ptr<cfg>" (call nothing)) (return 0))`, "eval", "unknown function nothing"},
		{"a container's initializer fails", `(block (decl "v" :obj @"std::vector<int>" (call nothing)) (return 0))`, "eval", "unknown function nothing"},
		{"a container's item fails", `(block (decl "v" :obj @"std::vector<int>" (list (call nothing))) (return 0))`, "eval", "unknown function nothing"},
		{"a container's item of the wrong type", `(block (decl "v" :obj @"std::vector<int>" (list "x")) (return 0))`, "other", "cannot convert"},
		{"too many items for a std::array", `(block (decl "v" :obj @"std::array<int, 1>" (list 1 2)) (return 0))`, "eval", "too many initializers"},
		{"a regex's pattern fails", `(block (decl "re" :obj @"std::regex" (list (call nothing))) (return 0))`, "eval", "unknown function nothing"},
		{"a regex of a number", `(block (decl "re" :obj @"std::regex" (list 5)) (return 0))`, "eval", "std::regex re"},
		{"a struct assigned too long a list", `(block (decl "st" @"cfg") (expr (set "=" st (list 1 2 3))) (return 0))`, "eval", "3 initializers for cfg of 2 members"},
		{"a map of a struct the host cannot make", `(block (decl "m" :obj @"std::map<int, unmade>") (return 0))`, "eval", "no unmade struct"},
		{"a vector of a struct the host cannot make", `(block (decl "v" :obj @"std::vector<unmade>") (return 0))`, "eval", "no unmade struct"},
		{"a sized vector of a struct the host cannot make", `(block (decl "v" :obj @"std::vector<unmade>" (call std::vector 2)) (return 0))`, "eval", "no unmade struct"},
		{"a vector of arrays of an unknown length", `(block (decl "v" :obj @"std::vector<std::array<int, X>>") (return 0))`, "eval", "std::vector<std::array<int, X>> v"},
		{"an array without a length", `(block (decl "v" :obj @"std::array<int>") (return 0))`, "eval", "std::array<int> v"},
		{"an array of a negative size", `(block (decl "v" :obj @"std::array<int, -1>") (return 0))`, "eval", "resize to -1"},
		{"a struct the host cannot make", `(block (decl "st" @"unmade") (return 0))`, "eval", "no unmade struct"},
		{"a struct of too many initializers", `(block (decl "st" @"cfg" (list 1 2 3)) (return 0))`, "eval", "3 initializers for cfg of 2 members"},
		{"a struct's initializer of the wrong type", `(block (decl "st" @"cfg" (list "x")) (return 0))`, "eval", `cfg.a = "x"`},
		{"a struct's initializer fails", `(block (decl "st" @"cfg" (list (call nothing))) (return 0))`, "eval", "unknown function nothing"},
		{"a scalar's initializer fails", `(block (decl "x" :i32 (call nothing)) (return 0))`, "eval", "unknown function nothing"},
		{"an array sized by a bad product", `(block (decl "v" :obj @"std::array<int, 2*X>") (return 0))`, "eval", "std::array<int, 2*X> v"},
		{"an array sized by a bad factor", `(block (decl "v" :obj @"std::array<int, X*2>") (return 0))`, "eval", "std::array<int, X*2> v"},
	})
}

// Expressions: names, members, indexes, operators, assignment, calls.
func TestExpressions(t *testing.T) {
	checkValues(t, eval, []valueCase{
		{"a member assigned to this", `(block (expr (set "=" (mem "q" this) 5)) (return q))`, int64(5)},
		{"a name of the constants", `(return (bin "+" (cast :i32 true) (cast :i32 UINT32_MAX)))`, int64(0)},
		{"a struct member through a pointer", `(block (decl "st" @"cfg") (decl "p" :ptr (un "&" st)) (expr (set "=" (mem "a" p) 3)) (return (mem "a" st)))`, int64(3)},
		{"a write through an address", `(block (decl "x" :i32 1) (decl "p" (un "&" x)) (expr (set "=" (un "*" p) 9)) (return (bin "+" x (un "*" p))))`, int64(18)},
		{"a dereference of a non-address", `(block (decl "x" :i32 1) (expr (set "=" (un "*" x) 4)) (return (un "*" x)))`, int64(4)},
		{"the address of a constant is its value", `(return (un "&" SEVEN))`, int64(7)},
		{"the address of a call is its value", `(return (un "&" (call sum3 0)))`, int64(17)},
		{"the address of an array is the array", `(block (decl "v" :obj @"std::vector<int>" (list 4)) (decl "p" (un "&" v)) (return (idx p 0)))`, int64(4)},
		{"unary plus", `(return (un "+" 3))`, int64(3)},
		{"not", `(return (un "!" 0))`, int64(1)},
		{"negation of a float", `(return (un "-" 1.5))`, -1.5},
		{"negation of an unsigned", `(return (un "-" (cast :u32 1)))`, int64(4294967295)},
		{"complement", `(return (un "~" 0))`, int64(-1)},
		{"pre-decrement", `(block (decl "x" :i32 3) (decl "y" :i32 (un "pre--" x)) (return (bin "+" (bin "*" 10 x) y)))`, int64(22)},
		{"post-decrement", `(block (decl "x" :i32 3) (decl "y" :i32 (un "post--" x)) (return (bin "+" (bin "*" 10 x) y)))`, int64(23)},
		{"and", `(return (bin "+" (bin "&&" 1 2) (bin "&&" 1 0)))`, int64(1)},
		{"or of two falses", `(return (bin "||" 0 0))`, int64(0)},
		{"the else of a ternary", `(return (cond 0 1 2))`, int64(2)},
		{"a cast to a pointer is the value", `(return (cast :ptr 5))`, int64(5)},
		{"a map's operator[] inserts", `(block (decl "m" :obj @"std::map<int, int>") (expr (idx m 3)) (return (call (mem "count" m) 3)))`, int64(1)},
		{"a u64 index past the end", `(block (decl "v" :obj @"std::vector<int>" (list 1)) (decl "i" :u64 0) (expr (set "-=" i 1)) (return (call (mem "size" v))))`, int64(1)},
		{"a lambda's default parameter", `(block (decl "f" (lambda (block (decl "k" :i32 4)) (block (return (bin "*" k 2))))) (return (call f)))`, int64(8)},
		{"a lambda called with a brace list", `(block (decl "f" (lambda (block (decl "v" :obj)) (block (return (call (mem "size" v)))))) (return (call f (list 1 2 3))))`, int64(3)},
		{"a function held by a member of this", `(block (expr (set "=" (mem "cb" this) (lambda (block (decl "k" :i32)) (block (return (bin "+" k 1)))))) (return (call cb 2)))`, int64(3)},
		{"a method taken as a value", `(block (decl "f" (mem "size" "abcd")) (return (call f)))`, int64(4)},
		{"a host method taken as a value", `(block (decl "f" (mem "double" GADGET)) (return (call f 5)))`, int64(10)},
		{"a member of a struct of this", `(block (decl "st" @"cfg" (list 2 3)) (expr (set "=" (mem "s" this) st)) (return (mem "b" (mem "s" this))))`, int64(3)},
		{"a struct assigned is copied", `(block (decl "st" @"cfg" (list 2 3)) (decl "c" @"cfg") (expr (set "=" c st)) (expr (set "=" (mem "a" st) 9)) (return (mem "a" c)))`, int64(2)},
	})
	checkErrors(t, eval, []errorCase{
		{"a host constant is no lvalue", `(expr (set "=" SEVEN 1))`, "eval", "SEVEN is not assignable"},
		{"an unknown name as an lvalue", `(expr (set "=" (mem "a" nothing_here) 1))`, "abort", "null pointer dereference reading .a"},
		{"a member of a null pointer assigned", `(block (decl "p" :ptr nullptr) (expr (set "=" (mem "x" p) 1)))`, "abort", "null pointer dereference reading .x"},
		{"a member of a number assigned", `(expr (set "=" (mem "x" 5) 1))`, "eval", "member x of i32 5 is not assignable"},
		{"a member of an object that fails", `(expr (set "=" (mem "x" (call nothing)) 1))`, "eval", "unknown function nothing"},
		{"a member of a null pointer read", `(block (decl "p" :ptr nullptr) (return (mem "x" p)))`, "abort", "null pointer dereference reading ->x"},
		{"a member of an object that fails, read", `(return (mem "x" (call nothing)))`, "eval", "unknown function nothing"},
		{"a method of a null pointer", `(block (decl "p" :ptr nullptr) (return (call (mem "f" p))))`, "abort", "null pointer dereference calling f"},
		{"a method of an object that fails", `(return (call (mem "f" (call nothing))))`, "eval", "unknown function nothing"},
		{"an index of a string", `(block (decl "v" :obj @"std::vector<int>" (list 1)) (return (idx v "x")))`, "eval", `index "x"`},
		{"an index into what fails", `(return (idx (call nothing) 0))`, "eval", "unknown function nothing"},
		{"an index that fails", `(block (decl "v" :obj @"std::vector<int>" (list 1)) (return (idx v (call nothing))))`, "eval", "unknown function nothing"},
		{"a u64 index that wrapped", `(block (decl "v" :obj @"std::vector<int>" (list 1)) (decl "i" :u64 0) (expr (set "-=" i 1)) (return (idx v i)))`, "abort", "index 4611686018427387904 out of range"},
		{"an increment of what fails", `(expr (un "pre++" (idx (call nothing) 0)))`, "eval", "unknown function nothing"},
		{"an increment of a string", `(block (decl "s" :str "a") (expr (un "pre++" s)))`, "eval", "cannot convert i32 1 to a string"},
		{"the address of what fails", `(return (un "&" (mem "x" (call nothing))))`, "eval", "unknown function nothing"},
		{"an operand that fails", `(return (un "-" (call nothing)))`, "eval", "unknown function nothing"},
		{"an and that fails left", `(return (bin "&&" (call nothing) 1))`, "eval", "unknown function nothing"},
		{"an and that fails right", `(return (bin "&&" 1 (call nothing)))`, "eval", "unknown function nothing"},
		{"a binary operand that fails left", `(return (bin "+" (call nothing) 1))`, "eval", "unknown function nothing"},
		{"a binary operand that fails right", `(return (bin "+" 1 (call nothing)))`, "eval", "unknown function nothing"},
		{"a ternary's condition fails", `(return (cond (call nothing) 1 2))`, "eval", "unknown function nothing"},
		{"a cast of what fails", `(return (cast :i32 (call nothing)))`, "eval", "unknown function nothing"},
		{"a callee that fails", `(return (call (idx (call nothing) 0)))`, "eval", "unknown function nothing"},
		{"a call of a number", `(block (decl "v" :obj @"std::vector<int>" (list 1)) (return (call (idx v 0))))`, "eval", "call of i32 1"},
		{"a brace list's item fails", `(return (list (call nothing)))`, "eval", "unknown function nothing"},
		{"a struct list's item fails", `(return (list @"pt:x,y" (call nothing)))`, "eval", "unknown function nothing"},
		{"an assigned value fails", `(block (decl "x" :i32 0) (expr (set "=" x (call nothing))))`, "eval", "unknown function nothing"},
		{"a compound assignment of a string", `(block (decl "s" :str "a") (expr (set "-=" s 1)))`, "eval", `operator - on "a" and i32 1`},
		{"an assignment of the wrong type", `(block (decl "x" :i32 0) (expr (set "=" x "a")))`, "eval", "cannot convert"},
		{"an assignment to what fails", `(expr (set "=" (idx (call nothing) 0) 1))`, "eval", "unknown function nothing"},
		{"a statement as an expression", `(return (block))`, "eval", "expression block"},
		{"a statement with kids as an expression", `(return (if (nil) 1 (block) (nil)))`, "eval", "expression if"},
		{"a strict object's missing member", `(return (mem "n_head" STRICT))`, "eval", "llama_hparams has no member n_head"},
		{"a strict object's missing member assigned", `(expr (set "=" (mem "n_head" STRICT) 1))`, "eval", "llama_hparams has no member n_head"},
		{"a host tensor's unknown member", `(return (mem "nb" TENSOR))`, "eval", "member nb of tensor tok_embd"},
		{"a native handle's member", `(return (mem "ne" HANDLE))`, "eval", "member ne of ggml handle"},
		{"a set iterator's second", `(block (decl "s" :obj @"std::set<int>") (expr (call (mem "insert" s) 1)) (return (mem "second" (call (mem "begin" s)))))`, "eval", "member second of iterator"},
		{"the end iterator's first", `(block (decl "s" :obj @"std::set<int>") (return (mem "first" (call (mem "end" s)))))`, "eval", "member first of iterator"},
	})
}

// Values of the host's: objects with their own methods, members held by
// value, tensors, tensor names, enum constants; and a graph object as
// this.
func TestHostValues(t *testing.T) {
	checkValues(t, eval, []valueCase{
		{"an object's own method", `(return (call (mem "double" GADGET) 21))`, int64(42)},
		{"a strict object's member", `(return (mem "n_embd" STRICT))`, int64(64)},
		{"a member held by value", `(block (expr (set "=" (mem "x" (mem "ffn" LAYER)) 3)) (return (mem "x" (mem "ffn" LAYER))))`, int64(3)},
		{"a member never assigned", `(return (bin "==" (mem "wq" LAYER) nullptr))`, int64(1)},
		{"a host tensor's member", `(return (mem "ne0" TENSOR))`, int64(32)},
		{"a host tensor itself", `(return (bin "==" (mem "self" TENSOR) TENSOR))`, int64(1)},
		{"a tensor name's size", `(return (call (mem "size" TNAME)))`, int64(10)},
		{"a tensor name's c_str", `(return (call (mem "c_str" TNAME)))`, "blk.0.attn"},
		{"a tensor name's length", `(return (call (mem "length" TNAME)))`, int64(10)},
		{"a tensor name is no empty string", `(return (call (mem "empty" TNAME)))`, int64(0)},
		{"a tensor name and a suffix", `(return (bin "+" TNAME ".weight"))`, "blk.0.attn.weight"},
		{"a tensor name equals its string", `(return (bin "==" TNAME "blk.0.attn"))`, int64(1)},
		{"an enum constant", `(return (bin "!=" ENUM_A ENUM_A))`, int64(0)},
	})
	shared := cpp.NewObject("llm_graph_context")
	shared.Shared = true
	inShared := func(t *testing.T, body string) (cpp.Val, error) {
		return evalIn(t, cpp.Val{K: cpp.KObj, P: shared}, body)
	}
	checkValues(t, inShared, []valueCase{
		{"a graph object's member not yet assigned", `(return (bin "==" inp_pos nullptr))`, int64(1)},
		{"a graph object's member holds what is assigned", `(block (decl "v" :obj @"std::vector<int>") (expr (set "=" (mem "m" this) v))
			(expr (call (mem "push_back" v) 1)) (return (call (mem "size" (mem "m" this)))))`, int64(1)},
	})
	checkErrors(t, inShared, []errorCase{
		{"a graph object's upper-case name is no member", `(return NOT_A_MEMBER)`, "eval", "unknown name NOT_A_MEMBER"},
	})
	// an open object's member holds a copy
	checkValues(t, eval, []valueCase{
		{"an open object's member holds a copy", `(block (decl "v" :obj @"std::vector<int>") (expr (set "=" (mem "m" this) v))
			(expr (call (mem "push_back" v) 1)) (return (call (mem "size" (mem "m" this)))))`, int64(0)},
	})
	plain := func(t *testing.T, body string) (cpp.Val, error) {
		return evalIn(t, cpp.Val{K: cpp.KObj, P: cpp.NewObject("plain")}, body)
	}
	checkErrors(t, plain, []errorCase{
		{"a plain object's unknown name", `(return nothing_here)`, "eval", "unknown name nothing_here"},
		{"a library's constant is no lvalue", `(expr (set "=" K 1))`, "eval", "unknown name K"},
	})
	checkValues(t, plain, []valueCase{
		{"a plain object's member never assigned", `(return (bin "==" (mem "x" this) nullptr))`, int64(1)},
	})
}

// The standard library's functions, and their errors.
func TestStdFunctions(t *testing.T) {
	checkValues(t, eval, []valueCase{
		{"stoull reads the leading digits", `(return (call std::stoull " 12.attn"))`, int64(12)},
		{"memset of a struct", `(block (decl "st" @"cfg" (list 3 4)) (expr (call memset (un "&" st) 0 (call sizeof st))) (return (bin "+" (mem "a" st) (mem "b" st))))`, int64(0)},
		{"memset of a C array of floats", `(block (decl "a" :f32 @"array" 2 (list 1.5 2.5)) (expr (call memset a 0 (call sizeof a))) (return (idx a 1)))`, 0.0},
		{"memset of nested values", `(block (decl "v" :obj @"std::vector<foo>") (expr (call (mem "push_back" v) (list 1 2))) (expr (call (mem "push_back" v) "s"))
			(expr (call memset v 0 (call sizeof v))) (return (bin "+" (idx (idx v 0) 1) (bin "==" (idx v 1) nullptr))))`, int64(1)},
		{"sizeof a scalar type", `(return (bin "+" (call sizeof float) (call sizeof int64_t)))`, int64(12)},
		{"std::move", `(block (decl "v" :obj @"std::vector<int>" (list 1 2)) (decl "w" (call std::move v)) (return (call (mem "size" w))))`, int64(2)},
		{"format of many arguments", `(return (call format "%d%d%d%d%d" 1 2 3 4 5))`, "12345"},
		{"assert is compiled out", `(block (expr (call assert 0)) (return 1))`, int64(1)},
		{"GGML_ASSERT that holds", `(block (expr (call GGML_ASSERT (bin "<" 1 2))) (return 1))`, int64(1)},
		{"std::string of nothing", `(return (call std::string))`, ""},
		{"to_string of a u64", `(return (call std::to_string (cast :u64 -1)))`, "18446744073709551615"},
		{"strcmp less", `(return (bin "<" (call strcmp "a" "b") 0))`, int64(1)},
		{"strcmp equal", `(return (call strcmp "a" "a"))`, int64(0)},
		{"std::max of mixed types", `(return (call std::max (cast :u32 3) -1))`, int64(4294967295)},
		{"std::min of floats", `(return (call std::min 1.5 2.5))`, 1.5},
		{"std::abs", `(return (call std::abs -2.5))`, 2.5},
		{"lcm of a negative", `(return (call std::lcm -6 4))`, int64(12)},
		{"std::begin of a C array", `(block (decl "a" :i32 @"array" 3) (return (bin "-" (call std::end a) (call std::begin a))))`, int64(3)},
		{"std::copy into an array", `(block (decl "a" :obj @"std::vector<int>" (list 1 2)) (decl "b" :obj @"std::vector<int>" (list 0 0 0))
			(expr (call std::copy (call (mem "begin" a)) (call (mem "end" a)) (bin "+" (call (mem "begin" b)) 1))) (return (bin "+" (idx b 1) (idx b 2))))`, int64(3)},
		{"the constants", `(return (bin "+" (cast :i32 (bin ">" INFINITY FLT_MAX)) (cast :i32 (bin "==" INT32_MAX 2147483647))))`, int64(2)},
		{"false", `(return (cast :i32 false))`, int64(0)},
	})
	checkErrors(t, eval, []errorCase{
		{"stoull of no digits", `(return (call std::stoull "x"))`, "throw", "stoull"},
		{"stoull of a number", `(return (call std::stoull 3))`, "eval", "std::stoull arguments"},
		{"stoull of what fails", `(return (call std::stoull (call nothing)))`, "eval", "unknown function nothing"},
		{"memset to other than 0", `(block (decl "st" @"cfg") (expr (call memset (un "&" st) 1 (call sizeof st))))`, "eval", "memset to other than 0"},
		{"memset of another size", `(block (decl "st" @"cfg") (expr (call memset (un "&" st) 0 8)))`, "eval", "a size other than its own"},
		{"memset arguments", `(expr (call memset 1))`, "eval", "memset with 1 arguments"},
		{"memset of a scalar", `(block (decl "x" :i32 1) (expr (call memset (un "&" x) 0 (call sizeof x))))`, "other", "memset of i32 1"},
		{"memset of what fails", `(expr (call memset (un "&" (call nothing)) 0 0))`, "eval", "unknown function nothing"},
		{"sizeof an object", `(block (decl "x" :i32 1) (return (call sizeof x)))`, "eval", "only of a scalar type"},
		{"std::move of two", `(return (call std::move 1 2))`, "eval", "std::move of 2 arguments"},
		{"format of what fails", `(return (call format "%d" (call nothing)))`, "eval", "unknown function nothing"},
		{"format of what fails, fifth", `(return (call format "%d" 1 2 3 4 (call nothing)))`, "eval", "unknown function nothing"},
		{"GGML_ASSERT of what fails", `(expr (call GGML_ASSERT (call nothing)))`, "eval", "unknown function nothing"},
		{"GGML_ABORT without a format", `(expr (call GGML_ABORT))`, "eval", "format without a format string"},
		{"std::string of what fails", `(return (call std::string (call nothing)))`, "eval", "unknown function nothing"},
		{"std::string of a number", `(return (call std::string 1))`, "eval", "cannot convert"},
		{"to_string of what fails", `(return (call std::to_string (call nothing)))`, "eval", "unknown function nothing"},
		{"to_string of two", `(return (call std::to_string 1 2))`, "eval", "std::to_string with 2 arguments"},
		{"std::max of what fails", `(return (call std::max (call nothing) 1))`, "eval", "unknown function nothing"},
		{"std::max of a string", `(return (call std::max "a" 1))`, "eval", `operator < on "a" and i32 1`},
		{"a math function of what fails", `(return (call std::sqrt (call nothing)))`, "eval", "unknown function nothing"},
		{"strcmp of a number", `(return (call strcmp "a" 1))`, "eval", "strcmp of 2 arguments"},
		{"strcmp of what fails", `(return (call strcmp (call nothing) "a"))`, "eval", "unknown function nothing"},
		{"pow of what fails", `(return (call std::pow (call nothing) 2))`, "eval", "unknown function nothing"},
		{"lcm of what fails", `(return (call std::lcm (call nothing) 2))`, "eval", "unknown function nothing"},
		{"std::begin of a number", `(return (call std::begin 1))`, "eval", "an array wanted"},
		{"std::begin of what fails", `(return (call std::begin (call nothing)))`, "eval", "unknown function nothing"},
		{"regex_match of what fails", `(block (decl "re" :obj @"std::regex" (list "a")) (return (call std::regex_match (call nothing) re)))`, "eval", "unknown function nothing"},
		{"regex_match of a regex that fails", `(return (call std::regex_match "a" (call nothing)))`, "eval", "unknown function nothing"},
		{"regex_match of one argument", `(return (call std::regex_match "a"))`, "eval", "std::regex_match arguments"},
		{"std::vector of what fails", `(return (call std::vector (call nothing) 1))`, "eval", "unknown function nothing"},
		{"std::copy of two arguments", `(block (decl "a" :obj @"std::vector<int>" (list 1)) (expr (call std::copy (call (mem "begin" a)) (call (mem "end" a)))))`, "eval", "std::copy of 2 arguments"},
		{"std::copy of what fails", `(expr (call std::copy (call nothing) 1 2))`, "eval", "unknown function nothing"},
		{"std::copy from a map", `(block (decl "m" :obj @"std::set<int>") (decl "a" :obj @"std::vector<int>" (list 1))
			(expr (call std::copy (call (mem "begin" m)) (call (mem "end" m)) a)))`, "eval", "std::copy from a map"},
		{"std::copy into a number", `(block (decl "a" :obj @"std::vector<int>" (list 1)) (expr (call std::copy (call (mem "begin" a)) (call (mem "end" a)) 5)))`, "eval", "std::copy into i32 5"},
		{"std::copy past the end", `(block (decl "a" :obj @"std::vector<int>" (list 1 2)) (decl "b" :obj @"std::vector<int>" (list 0))
			(expr (call std::copy (call (mem "begin" a)) (call (mem "end" a)) b)))`, "abort", "out of bounds"},
		{"std::copy of the wrong type", `(block (decl "a" :obj @"std::vector<std::string>" (list "s")) (decl "b" :obj @"std::vector<int>" (list 0))
			(expr (call std::copy (call (mem "begin" a)) (call (mem "end" a)) b)))`, "other", "cannot convert"},
		{"std::fill's first fails", `(expr (call std::fill (call nothing) 1 2))`, "eval", "unknown function nothing"},
		{"std::fill's last fails", `(block (decl "a" :obj @"std::vector<int>" (list 1)) (expr (call std::fill (call (mem "begin" a)) (call nothing) 2)))`, "eval", "unknown function nothing"},
		{"std::fill's value fails", `(block (decl "a" :obj @"std::vector<int>" (list 1)) (expr (call std::fill (call (mem "begin" a)) (call (mem "end" a)) (call nothing))))`, "eval", "unknown function nothing"},
		{"std::fill over a map", `(block (decl "m" :obj @"std::set<int>") (expr (call std::fill (call (mem "begin" m)) (call (mem "end" m)) 1)))`, "eval", "std::fill over a map"},
		{"std::fill of the wrong type", `(block (decl "a" :obj @"std::vector<int>" (list 1)) (expr (call std::fill (call (mem "begin" a)) (call (mem "end" a)) "s")))`, "other", "cannot convert"},
		{"substr of what fails", `(return (call (mem "substr" "abc") (call nothing)))`, "eval", "unknown function nothing"},
		{"substr of a string length", `(return (call (mem "substr" "abc") 0 "x"))`, "eval", "substr argument 1"},
		{"find of a list", `(return (call (mem "find" "abc") (list 1)))`, "eval", "find of array"},
		{"find from a string position", `(return (call (mem "find" "abc") "b" "x"))`, "eval", "find argument 1"},
	})
}

// The containers' methods, and their errors.
func TestContainerMethods(t *testing.T) {
	checkValues(t, eval, []valueCase{
		{"a vector's data", `(block (decl "v" :obj @"std::vector<int>" (list 4 5)) (return (idx (call (mem "data" v)) 1)))`, int64(5)},
		{"a bitset's bit set to a value", `(block (decl "b" :obj @"std::array<bool, 4>") (expr (call (mem "set" b) 1 true)) (expr (call (mem "set" b) 1 false))
			(expr (call (mem "set" b) 2 true)) (return (bin "+" (call (mem "test" b) 1) (call (mem "test" b) 2))))`, int64(1)},
		{"a bitset set whole", `(block (decl "b" :obj @"std::array<bool, 2>") (expr (call (mem "set" b))) (return (bin "+" (call (mem "test" b) 0) (call (mem "test" b) 1))))`, int64(2)},
		{"a map's value by operator[]", `(block (decl "m" :obj @"std::map<int, int>") (expr (call (mem "insert" m) 2 9)) (return (idx m 2)))`, int64(9)},
		{"a map's insert of an existing key", `(block (decl "m" :obj @"std::map<int, int>") (expr (call (mem "insert" m) 2 9))
			(return (mem "second" (call (mem "insert" m) 2 8))))`, int64(0)},
		{"a set's insert", `(block (decl "s" :obj @"std::unordered_set<int>") (return (mem "second" (call (mem "insert" s) 2))))`, int64(1)},
		{"a map without a value", `(block (decl "m" :obj @"std::unordered_map<int, int>") (expr (call (mem "insert" m) 2)) (return (bin "==" (call (mem "at" m) 2) (call (mem "at" m) 2))))`, int64(1)},
		{"a set cleared", `(block (decl "s" :obj @"std::set<int>") (expr (call (mem "insert" s) 2)) (expr (call (mem "clear" s))) (return (call (mem "size" s))))`, int64(0)},
		{"a vector of int64_t", `(block (decl "v" :obj @"std::vector<int64_t>" (list 5000000000)) (return (idx v 0)))`, int64(5000000000)},
		{"a vector of size_t", `(block (decl "v" :obj @"std::vector<size_t>" (list -1)) (return (bin ">" (idx v 0) 0)))`, int64(1)},
		{"a vector of unsigned", `(block (decl "v" :obj @"std::vector<unsigned>" (list -1)) (return (idx v 0)))`, int64(4294967295)},
		{"a vector of strings", `(block (decl "v" :obj @"std::vector<std::string>") (expr (call (mem "resize" v) 1)) (return (call (mem "empty" (idx v 0)))))`, int64(1)},
		{"a vector of doubles", `(block (decl "v" :obj @"std::vector<double>" (list 1)) (return (idx v 0)))`, 1.0},
	})
	checkErrors(t, eval, []errorCase{
		{"a method's argument fails", `(block (decl "v" :obj @"std::vector<int>") (expr (call (mem "push_back" v) (call nothing))))`, "eval", "unknown function nothing"},
		{"push_back of the wrong type", `(block (decl "v" :obj @"std::vector<int>") (expr (call (mem "push_back" v) "s")))`, "other", "cannot convert"},
		{"a bitset's test of no bit", `(block (decl "b" :obj @"std::array<bool, 2>") (return (call (mem "test" b))))`, "eval", "method test of an array"},
		{"a map method's argument fails", `(block (decl "m" :obj @"std::map<int, int>") (return (call (mem "count" m) (call nothing))))`, "eval", "unknown function nothing"},
		{"a set's at", `(block (decl "s" :obj @"std::set<int>") (return (call (mem "at" s) 1)))`, "eval", "at arguments"},
		{"a string's unknown method", `(return (call (mem "frob" "abc")))`, "eval", `no method frob on "abc"`},
	})
}
