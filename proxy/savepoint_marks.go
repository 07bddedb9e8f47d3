package proxy

import "github.com/pgowl/pgowl/classify"

// savepointMarks are the savepoints set in an open transaction block and not
// released, oldest first, each with the state (of a part that follows
// savepoints) when it was set. A name may repeat: the newest one counts, as
// in PostgreSQL.
type savepointMarks[T any] []savepointMark[T]

type savepointMark[T any] struct {
	name  string
	state T
}

// follow applies a SAVEPOINT (recording now()), RELEASE or ROLLBACK TO that
// ran alone and succeeded. For a ROLLBACK TO it returns the state to go back
// to (the savepoint stays: a second ROLLBACK TO it undoes again), with back
// set. followed is false for a RELEASE or ROLLBACK TO of a savepoint not
// seen set (PostgreSQL refused it, or it was set where pgowl did not follow).
func (s *savepointMarks[T]) follow(st *classify.TransactionStatement, now func() T) (state T, back, followed bool) {
	if st == nil || st.Savepoint == "" {
		return state, false, false
	}
	if st.Kind == classify.TxKindSavepoint {
		*s = append(*s, savepointMark[T]{name: st.Savepoint, state: now()})
		return state, false, true
	}
	i := len(*s) - 1
	for i >= 0 && (*s)[i].name != st.Savepoint {
		i--
	}
	if i < 0 {
		return state, false, false
	}
	switch st.Kind {
	case classify.TxKindRelease:
		*s = (*s)[:i]
		return state, false, true
	case classify.TxKindRollbackToSavepoint:
		*s = (*s)[:i+1]
		return (*s)[i].state, true, true
	}
	return state, false, false
}

// clear forgets every savepoint: the block has ended.
func (s *savepointMarks[T]) clear() { *s = (*s)[:0] }
