package proxy

import (
	"strings"
	"testing"
	"time"
)

// TestCostCheckCancelledRefusal: a cost check the node cancelled is refused
// with 57014, a message that says what cancelled it, and a DETAIL in the
// cost refusal's key=value form.
func TestCostCheckCancelledRefusal(t *testing.T) {
	cases := []struct {
		name        string
		in          costCheckCancelled
		wantMessage string
		wantDetail  string
		wantHint    string
	}{
		{
			name:        "limits.query_timeout",
			in:          costCheckCancelled{guard: "analytics", node: "pg1", queryTimeout: 1500 * time.Millisecond, nodeMessage: "canceling statement due to user request"},
			wantMessage: "pgowl: canceling statement due to limits.query_timeout (1.5s): its cost check (EXPLAIN) on pg1 did not finish",
			wantDetail:  `guard=analytics node=pg1 cost_check=cancelled query_timeout=1.5s node_error="canceling statement due to user request"`,
			wantHint:    "conflicting lock",
		},
		{
			name:        "statement_timeout",
			in:          costCheckCancelled{guard: "etl", node: "pg2", nodeMessage: "canceling statement due to statement timeout"},
			wantMessage: "pgowl: the cost check (EXPLAIN) of the statement was cancelled on pg2: canceling statement due to statement timeout",
			wantDetail:  `guard=etl node=pg2 cost_check=cancelled node_error="canceling statement due to statement timeout"`,
			wantHint:    "statement_timeout",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.refusal()
			if got.SQLState != sqlstateQueryCanceled || got.Message != tc.wantMessage || got.Detail != tc.wantDetail {
				t.Errorf("refusal:\n %s %q\n %q\nwant:\n %s %q\n %q", got.SQLState, got.Message, got.Detail, sqlstateQueryCanceled, tc.wantMessage, tc.wantDetail)
			}
			if !strings.Contains(got.Hint, "did not run") || !strings.Contains(got.Hint, tc.wantHint) {
				t.Errorf("hint %q, want it to say the statement did not run and mention %q", got.Hint, tc.wantHint)
			}
			if errorCode(&tc.in) != sqlstateQueryCanceled {
				t.Errorf("errorCode = %q", errorCode(&tc.in))
			}
		})
	}
}

// TestAbortTransactionSQL: the statement that fails a transaction after a
// refusal raises the refusal's SQLSTATE, and only a well-formed one.
func TestAbortTransactionSQL(t *testing.T) {
	for code, want := range map[string]string{
		"57014":    "ERRCODE = '57014'",
		"54001":    "ERRCODE = '54001'",
		"5401'":    "ERRCODE = '54001'",
		"x'; --":   "ERRCODE = '54001'",
		"":         "ERRCODE = '54001'",
		"570144":   "ERRCODE = '54001'",
		"53300":    "ERRCODE = '53300'",
		"abcde":    "ERRCODE = '54001'",
		"P0001":    "ERRCODE = 'P0001'",
		"22P02":    "ERRCODE = '22P02'",
		"2200\x00": "ERRCODE = '54001'",
	} {
		if got := abortTransactionSQL(code); !strings.Contains(got, want) || !strings.HasPrefix(got, "DO $$BEGIN RAISE EXCEPTION ") {
			t.Errorf("abortTransactionSQL(%q) = %q, want it to contain %q", code, got, want)
		}
	}
}
