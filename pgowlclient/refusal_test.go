package pgowlclient

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestAsRefusalTellsPgowlRefusalsApartBySQLStateAndPrefix(t *testing.T) {
	cases := []struct {
		name     string
		err      *pgconn.PgError
		wantCode Code
		wantKind Kind
	}{
		{"no readable replica", &pgconn.PgError{Code: "57P03", Message: "pgowl: NO_READABLE_REPLICA: no standby is up"}, NoReadableReplica, Transient},
		{"lag exceeded", &pgconn.PgError{Code: "57P03", Message: "pgowl: REPLICA_LAG_EXCEEDED: no standby within 5s"}, ReplicaLagExceeded, Transient},
		{"no primary", &pgconn.PgError{Code: "57P03", Message: "pgowl: NO_PRIMARY: no primary within 5s"}, NoPrimary, Transient},
		{"database busy", &pgconn.PgError{Code: "53300", Message: "pgowl: DATABASE_BUSY: no backend connection to pg1 within 5s"}, DatabaseBusy, Transient},
		{"cost", &pgconn.PgError{Code: "54001", Message: "pgowl: QUERY_COST_EXCEEDED: estimated cost 182340 exceeds the limit 50000"}, QueryCostExceeded, Fixable},
		{"primary replaced", &pgconn.PgError{Code: "08006", Message: "pgowl: pg1 is no longer the primary (pg2 was promoted); the transaction on pg1 is gone"}, PrimaryReplaced, TransactionLost},
		{"primary replaced, prefixed form", &pgconn.PgError{Code: "08006", Message: "pgowl: PRIMARY_REPLACED: pg1 is no longer the primary"}, PrimaryReplaced, TransactionLost},
		// Not refusals:
		{"lost connection: may have run", &pgconn.PgError{Code: "08006", Message: "pgowl: lost the connection to pg1 while it ran the statement"}, "", 0},
		{"right prefix, wrong SQLSTATE", &pgconn.PgError{Code: "XX000", Message: "pgowl: NO_PRIMARY: x"}, "", 0},
		{"right SQLSTATE, a node's own error", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, "", 0},
		{"a node's 53300", &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}, "", 0},
		{"a node's 54001", &pgconn.PgError{Code: "54001", Message: "stack depth limit exceeded"}, "", 0},
		{"unknown pgowl code", &pgconn.PgError{Code: "57P03", Message: "pgowl: SOMETHING_NEW: x"}, "", 0},
		{"invalid request is a bug, not retried", &pgconn.PgError{Code: "XX000", Message: "pgowl: INVALID_REQUEST: x"}, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Wrapped the way callers see it, to check errors.As is used.
			r := AsRefusal(fmt.Errorf("query: %w", tc.err))
			if tc.wantCode == "" {
				if r != nil {
					t.Fatalf("got refusal %s (%s), want none", r.Code, r.Kind)
				}
				return
			}
			if r == nil {
				t.Fatalf("got no refusal, want %s", tc.wantCode)
			}
			if r.Code != tc.wantCode || r.Kind != tc.wantKind {
				t.Errorf("got %s (%s), want %s (%s)", r.Code, r.Kind, tc.wantCode, tc.wantKind)
			}
			var pgErr *pgconn.PgError
			if !errors.As(r, &pgErr) || pgErr != tc.err {
				t.Errorf("the refusal does not unwrap to the PgError")
			}
			if IsTransient(tc.err) != (tc.wantKind == Transient) {
				t.Errorf("IsTransient = %t, want %t", !(tc.wantKind == Transient), tc.wantKind == Transient)
			}
		})
	}
	if AsRefusal(nil) != nil || AsRefusal(errors.New("pgowl: NO_PRIMARY: text only")) != nil {
		t.Errorf("an error without a PgError must not be a refusal")
	}
}

func TestAsRefusalParsesTheCostDetail(t *testing.T) {
	pgErr := &pgconn.PgError{
		Code:    "54001",
		Message: "pgowl: QUERY_COST_EXCEEDED: estimated cost 182340 exceeds the limit 50000",
		Detail: "guard=reports node=pg2 estimated_cost=182340.00 limit=50000\n" +
			`plan_node="Seq Scan" relation=public.big index=- rows=1000000 own_cost=180000.00 share_pct=98.7`,
		Hint: "Add a filter on an indexed column; retrying the same SQL will fail again.",
	}
	r := AsRefusal(pgErr)
	if r == nil || r.Kind != Fixable {
		t.Fatalf("got %v, want a fixable refusal", r)
	}
	if r.CostDetailErr != nil || r.Cost == nil {
		t.Fatalf("cost detail not parsed: %v", r.CostDetailErr)
	}
	if len(r.Cost.PlanNodes) != 1 || r.Cost.PlanNodes[0].NodeType != "Seq Scan" || r.Cost.PlanNodes[0].Relation != "public.big" {
		t.Errorf("plan nodes %+v, want the Seq Scan on public.big", r.Cost.PlanNodes)
	}
	// A DETAIL that does not follow the contract still leaves a fixable refusal.
	bad := *pgErr
	bad.Detail = "total cost too high"
	r = AsRefusal(&bad)
	if r == nil || r.Kind != Fixable || r.Cost != nil || r.CostDetailErr == nil {
		t.Errorf("malformed DETAIL: got %+v, want a fixable refusal with CostDetailErr set", r)
	}
}
