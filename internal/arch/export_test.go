package arch

import "errors"

// IsEvalError reports whether err is a construct the evaluator does not
// know (a defect of ggload, never of the file).
func IsEvalError(err error) bool {
	var e *evalError
	return errors.As(err, &e)
}
