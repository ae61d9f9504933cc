package arch

import (
	"errors"

	"github.com/ggload/ggload/internal/replay/cpp"
)

// IsEvalError reports whether err is a construct the evaluator does not
// know (a defect of ggload, never of the file).
func IsEvalError(err error) bool {
	var e *cpp.EvalError
	return errors.As(err, &e)
}
