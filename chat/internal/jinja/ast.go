// Port of llama.cpp common/jinja/runtime.h (v0.5.0): the statements and
// expressions of a parsed template. Each node's eval is the pin's
// execute_impl; the runtime's exec wraps it as statement::execute does.

package jinja

type node interface {
	position() int
	typeName() string
	eval(r *renderer, c *scope) value
}

type nodeBase struct{ pos int }

func (n *nodeBase) position() int { return n.pos }

type (
	program struct {
		nodeBase
		body []node
	}
	ifStmt struct {
		nodeBase
		test            node
		body, alternate []node
	}
	forStmt struct {
		nodeBase
		loopvar, iterable node
		body, otherwise   []node
	}
	breakStmt    struct{ nodeBase }
	continueStmt struct{ nodeBase }
	noopStmt     struct{ nodeBase }
	setStmt      struct {
		nodeBase
		assignee, val node // val is nil for a block set
		body          []node
	}
	macroStmt struct {
		nodeBase
		name       node
		args, body []node
	}
	commentStmt struct {
		nodeBase
		text string
	}
	blankExpr  struct{ nodeBase }
	memberExpr struct {
		nodeBase
		object, property node
		computed         bool
		name             *strVal // obj.name's name as a value, made once
	}
	callExpr struct {
		nodeBase
		callee node
		args   []node
	}
	identNode struct {
		nodeBase
		name string
	}
	intLit struct {
		nodeBase
		v int64
	}
	floatLit struct {
		nodeBase
		v float64
	}
	strLit struct {
		nodeBase
		v string
	}
	arrayLit struct {
		nodeBase
		items []node
	}
	tupleLit struct {
		nodeBase
		items []node
	}
	objectLit struct {
		nodeBase
		keys, vals []node
	}
	binaryExpr struct {
		nodeBase
		op          string
		left, right node
	}
	filterExpr struct {
		nodeBase
		operand, filter node
	}
	filterStmt struct {
		nodeBase
		filter node
		body   []node
	}
	selectExpr struct {
		nodeBase
		lhs, test node
	}
	testExpr struct {
		nodeBase
		operand node
		negate  bool
		test    node
	}
	unaryExpr struct {
		nodeBase
		op  string
		arg node
	}
	sliceExpr struct {
		nodeBase
		start, stop, step node
	}
	kwargExpr struct {
		nodeBase
		key, val node
	}
	spreadExpr struct {
		nodeBase
		arg node
	}
	callStmt struct {
		nodeBase
		call             *callExpr
		callerArgs, body []node
	}
	ternaryExpr struct {
		nodeBase
		cond, yes, no node
	}
)

func (*program) typeName() string      { return "Program" }
func (*ifStmt) typeName() string       { return "If" }
func (*forStmt) typeName() string      { return "For" }
func (*breakStmt) typeName() string    { return "Break" }
func (*continueStmt) typeName() string { return "Continue" }
func (*noopStmt) typeName() string     { return "Noop" }
func (*setStmt) typeName() string      { return "Set" }
func (*macroStmt) typeName() string    { return "Macro" }
func (*commentStmt) typeName() string  { return "Comment" }
func (*blankExpr) typeName() string    { return "BlankExpression" }
func (*memberExpr) typeName() string   { return "MemberExpression" }
func (*callExpr) typeName() string     { return "CallExpression" }
func (*identNode) typeName() string    { return "Identifier" }
func (*intLit) typeName() string       { return "IntegerLiteral" }
func (*floatLit) typeName() string     { return "FloatLiteral" }
func (*strLit) typeName() string       { return "StringLiteral" }
func (*arrayLit) typeName() string     { return "ArrayLiteral" }
func (*tupleLit) typeName() string     { return "TupleLiteral" }
func (*objectLit) typeName() string    { return "ObjectLiteral" }
func (*binaryExpr) typeName() string   { return "BinaryExpression" }
func (*filterExpr) typeName() string   { return "FilterExpression" }
func (*filterStmt) typeName() string   { return "FilterStatement" }
func (*selectExpr) typeName() string   { return "SelectExpression" }
func (*testExpr) typeName() string     { return "TestExpression" }
func (*unaryExpr) typeName() string    { return "UnaryExpression" }
func (*sliceExpr) typeName() string    { return "SliceExpression" }
func (*kwargExpr) typeName() string    { return "KeywordArgumentExpression" }
func (*spreadExpr) typeName() string   { return "SpreadExpression" }
func (*callStmt) typeName() string     { return "CallStatement" }
func (*ternaryExpr) typeName() string  { return "Ternary" }
