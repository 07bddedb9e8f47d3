package proxy

import (
	"github.com/pgowl/pgowl/classify"
)

// classify returns the effects of sql as the session would run it.
// paramTypes are the parameter type OIDs a Parse message declared (nil for a
// simple Query). This is the one place the session asks the classifier, so
// that what the classifier needs to know of the session (its database, its
// search_path) is gathered here.
func (sess *session) classify(sql string, paramTypes []uint32) classify.Effects {
	return sess.srv.opts.Classifier.Classify(sql)
}
