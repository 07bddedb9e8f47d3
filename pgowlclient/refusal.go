package pgowlclient

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Code names one of pgowl's refusals, as its message spells it after "pgowl: ".
type Code string

// pgowl's refusal codes.
const (
	// NoReadableReplica: a read found no standby that is up (57P03).
	NoReadableReplica Code = "NO_READABLE_REPLICA"
	// ReplicaLagExceeded: standbys are up but none is within the lag limit (57P03).
	ReplicaLagExceeded Code = "REPLICA_LAG_EXCEEDED"
	// NoPrimary: no node is an available, unambiguous primary (57P03).
	NoPrimary Code = "NO_PRIMARY"
	// DatabaseBusy: no backend connection to spare, or the node is over a
	// guard's load limit (53300).
	DatabaseBusy Code = "DATABASE_BUSY"
	// QueryCostExceeded: the statement's planned cost is over a guard's
	// limit; the same SQL will be refused again (54001).
	QueryCostExceeded Code = "QUERY_COST_EXCEEDED"
	// PrimaryReplaced: the session's transaction (or pinned state) was on a
	// node that is no longer the primary and is gone (08006).
	PrimaryReplaced Code = "PRIMARY_REPLACED"
)

// Kind says what a caller may do about a refusal.
type Kind uint8

const (
	// Transient refusals clear by themselves (a standby restarts, catches
	// up, a failover ends, load falls): the same SQL may be sent again later.
	Transient Kind = iota + 1
	// Fixable refusals are about the SQL itself: sending it again fails
	// again; the caller must change it.
	Fixable
	// TransactionLost refusals mean the transaction the statement belonged
	// to is gone: only the whole transaction, from its start, may be run again.
	TransactionLost
)

var kindNames = [...]string{Transient: "transient", Fixable: "fixable", TransactionLost: "transaction_lost"}

// String returns the kind's name, such as "transient".
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// refusalShape is what identifies a code on the wire and what it means.
type refusalShape struct {
	sqlState string
	kind     Kind
}

// refusalShapes is pgowl's contract: a refusal is recognised only by its
// SQLSTATE together with its message prefix "pgowl: <CODE>:".
var refusalShapes = map[Code]refusalShape{
	NoReadableReplica:  {"57P03", Transient},
	ReplicaLagExceeded: {"57P03", Transient},
	NoPrimary:          {"57P03", Transient},
	DatabaseBusy:       {"53300", Transient},
	QueryCostExceeded:  {"54001", Fixable},
	PrimaryReplaced:    {"08006", TransactionLost},
}

// Refusal is one of pgowl's refusals to run a statement, recognised from
// the ErrorResponse pgowl sent.
type Refusal struct {
	// Code names the refusal.
	Code Code
	// Kind says whether retrying can help, and what to retry.
	Kind Kind
	// Cost holds the plan nodes of a QUERY_COST_EXCEEDED refusal, parsed
	// from its DETAIL; nil for other codes or when the DETAIL could not be
	// parsed (then CostDetailErr says why).
	Cost *CostExceeded
	// CostDetailErr is why a QUERY_COST_EXCEEDED DETAIL could not be parsed.
	CostDetailErr error
	// Err is the error as pgowl sent it: message, DETAIL (the nodes' state
	// or the plan), HINT.
	Err *pgconn.PgError
}

// Error returns the error pgowl sent.
func (r *Refusal) Error() string { return r.Err.Error() }

// Unwrap returns the *pgconn.PgError.
func (r *Refusal) Unwrap() error { return r.Err }

// AsRefusal finds a pgowl refusal in err's chain: a *Refusal this package
// returned, or a *pgconn.PgError from pgx or database/sql whose SQLSTATE and
// message prefix are one of pgowl's refusals. It returns nil for any other
// error, including pgowl's "lost the connection" (08006): there the
// statement may or may not have run, so it is never retried here.
func AsRefusal(err error) *Refusal {
	if err == nil {
		return nil
	}
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	code, ok := refusalCode(pgErr)
	if !ok {
		return nil
	}
	r = &Refusal{Code: code, Kind: refusalShapes[code].kind, Err: pgErr}
	if code == QueryCostExceeded {
		r.Cost, r.CostDetailErr = ParseCostDetail(pgErr.Detail)
	}
	return r
}

// IsTransient reports whether err is a transient pgowl refusal.
func IsTransient(err error) bool {
	r := AsRefusal(err)
	return r != nil && r.Kind == Transient
}

// refusalCode reads the code from a pgowl ErrorResponse.
func refusalCode(e *pgconn.PgError) (Code, bool) {
	rest, ok := strings.CutPrefix(e.Message, noticePrefix)
	if !ok {
		return "", false
	}
	if name, _, ok := strings.Cut(rest, ":"); ok {
		code := Code(name)
		if shape, known := refusalShapes[code]; known && shape.sqlState == e.Code {
			return code, true
		}
	}
	// PRIMARY_REPLACED names the node instead of its code:
	// "pgowl: <node> is no longer the primary (...); the transaction on <node> is gone".
	if e.Code == refusalShapes[PrimaryReplaced].sqlState && strings.Contains(rest, " is no longer the primary") {
		return PrimaryReplaced, true
	}
	return "", false
}
