package proxy

import (
	"bytes"
	"testing"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/wire"
)

// relayOutcome relays stream as the replies to expected, with effects eff
// and the backend's status before the exchange, and returns the outcome.
func relayOutcome(t *testing.T, stream []byte, eff classify.Effects, before byte, expected ...byte) exchangeOutcome {
	t.Helper()
	var client bytes.Buffer
	sess := relaySession(&client)
	be := &backend{node: "n1", conn: &pool.Conn{TxStatus: before, Reader: wire.NewReader(bytes.NewReader(stream), 4096, 1<<20)}}
	for _, typ := range expected {
		be.expect.push(expectation{typ: typ})
	}
	out, err := sess.relay(be, &unit{effects: eff})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRelayReturnsWhatTheExchangeDid(t *testing.T) {
	commitString := func() []byte {
		var b []byte
		b = wire.AppendFrame(b, wire.MsgCommandComplete, []byte("INSERT 0 1\x00"))
		b = wire.AppendFrame(b, wire.MsgCommandComplete, []byte("COMMIT\x00"))
		return wireReady(b, wire.TxIdle)
	}
	endsTx := classify.Effects{Tx: classify.TxEnd, Statements: 2}

	t.Run("a COMMIT in a unit that ends a transaction commits", func(t *testing.T) {
		out := relayOutcome(t, commitString(), endsTx, wire.TxInBlock, wire.MsgQuery)
		if !out.committed || out.txStatus != wire.TxIdle || out.errCode != "" || out.completions != 2 || out.node != "n1" {
			t.Fatalf("outcome %+v, want committed, status I, no error, 2 completions on n1", out)
		}
		if out.logOutcome() != "ok" {
			t.Fatalf("log outcome %q, want ok", out.logOutcome())
		}
	})
	t.Run("tags are not read when no transaction control or pending SET needs them", func(t *testing.T) {
		out := relayOutcome(t, commitString(), classify.Effects{Statements: 2}, wire.TxInBlock, wire.MsgQuery)
		if out.committed || out.completions != 2 {
			t.Fatalf("outcome %+v, want not committed (tags unread), 2 completions", out)
		}
	})
	t.Run("a ROLLBACK after a COMMIT leaves it uncommitted", func(t *testing.T) {
		var b []byte
		b = wire.AppendFrame(b, wire.MsgCommandComplete, []byte("COMMIT\x00"))
		b = wire.AppendFrame(b, wire.MsgCommandComplete, []byte("ROLLBACK\x00"))
		out := relayOutcome(t, wireReady(b, wire.TxIdle), endsTx, wire.TxInBlock, wire.MsgQuery)
		if out.committed {
			t.Fatalf("outcome %+v, want not committed", out)
		}
	})
	t.Run("an error is the exchange's code", func(t *testing.T) {
		var b []byte
		b = wire.AppendFrame(b, wire.MsgErrorResponse, []byte("SERROR\x00VERROR\x00C42601\x00Msyntax error\x00\x00"))
		out := relayOutcome(t, wireReady(b, wire.TxFailed), classify.Effects{Statements: 1}, wire.TxInBlock, wire.MsgQuery)
		if out.errCode != "42601" || !out.failed() || out.txStatus != wire.TxFailed || out.logOutcome() != "42601" {
			t.Fatalf("outcome %+v, want error 42601 and status E", out)
		}
	})
	t.Run("without a ReadyForQuery the status is the one before", func(t *testing.T) {
		var b []byte
		b = wire.AppendFrame(b, wire.MsgBindComplete, nil)
		b = wire.AppendFrame(b, wire.MsgCommandComplete, []byte("SELECT 1\x00"))
		out := relayOutcome(t, b, classify.Effects{Statements: 1}, wire.TxInBlock, wire.MsgBind, wire.MsgExecute)
		if out.txStatus != wire.TxInBlock || out.completions != 1 {
			t.Fatalf("outcome %+v, want status T kept and 1 completion", out)
		}
	})
}

func TestFirstErrorIsTheExchangesCode(t *testing.T) {
	var out exchangeOutcome
	out.noteError("22012")
	out.noteError("25P02")
	if out.errCode != "22012" {
		t.Fatalf("error code %q, want the first one, 22012", out.errCode)
	}
}

func TestSessionEffectsAreTrackedByOutcome(t *testing.T) {
	set := classify.Effects{Statements: 1, Session: classify.SessionSet}
	cases := []struct {
		name      string
		u         unit
		errCode   string
		openBatch bool
		want      effectsTracking
	}{
		{name: "no session effect", u: unit{effects: classify.Effects{Statements: 1}, setSQL: "SELECT 1"}, want: trackNothing},
		{name: "prepare only: runs nothing", u: unit{effects: set, setSQL: "SET a = 1", runsNothing: true}, want: trackNothing},
		{name: "a single statement that succeeded", u: unit{effects: set, setSQL: "SET a = 1"}, want: trackExact},
		{name: "a single statement that failed changed nothing", u: unit{effects: set, setSQL: "SET a = 1"}, errCode: "22023", want: trackNothing},
		{name: "a failed multi-statement string may have taken effect in part",
			u: unit{effects: classify.Effects{Statements: 2, Session: classify.SessionSet}}, errCode: "22023", want: trackUncertain},
		{name: "a multi-statement string that succeeded",
			u: unit{effects: classify.Effects{Statements: 2, Session: classify.SessionSet}}, want: trackUncertain},
		{name: "an extended statement (no SQL to replay)", u: unit{effects: set}, want: trackUncertain},
		{name: "part of a batch not yet synced", u: unit{effects: set, setSQL: "SET a = 1"}, openBatch: true, want: trackUncertain},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := exchangeOutcome{errCode: tc.errCode}
			if got := sessionEffectsTracking(&tc.u, &out, tc.openBatch); got != tc.want {
				t.Fatalf("tracking %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPendingSetsSettleByOutcome(t *testing.T) {
	single := func(kind classify.TxKind, tx classify.TxControl) classify.Effects {
		return classify.Effects{Statements: 1, Tx: tx, Transaction: &classify.TransactionStatement{Kind: kind}}
	}
	cases := []struct {
		name          string
		eff           classify.Effects
		out           exchangeOutcome
		followed      bool
		wantFate      pendingSetsFate
		wantCommitted bool
	}{
		{name: "COMMIT ended the transaction", eff: single(classify.TxKindCommit, classify.TxEnd),
			out: exchangeOutcome{txStatus: wire.TxIdle, committed: true}, wantFate: pendingSettled, wantCommitted: true},
		{name: "ROLLBACK ended it", eff: single(classify.TxKindRollback, classify.TxEnd),
			out: exchangeOutcome{txStatus: wire.TxIdle}, wantFate: pendingSettled},
		{name: "a statement inside the transaction", eff: classify.Effects{Statements: 1},
			out: exchangeOutcome{txStatus: wire.TxInBlock}, wantFate: pendingKept},
		{name: "a failed statement: the transaction's end decides", eff: single(classify.TxKindCommitAndChain, classify.TxEnd),
			out: exchangeOutcome{txStatus: wire.TxFailed, errCode: "40001"}, wantFate: pendingKept},
		{name: "ROLLBACK TO a savepoint not seen set: which SETs survive is unknown", eff: single(classify.TxKindRollbackToSavepoint, classify.TxOther),
			out: exchangeOutcome{txStatus: wire.TxInBlock}, wantFate: pendingKeptUncertain},
		{name: "ROLLBACK TO a savepoint the tracker followed", eff: single(classify.TxKindRollbackToSavepoint, classify.TxOther),
			out: exchangeOutcome{txStatus: wire.TxInBlock}, followed: true, wantFate: pendingKept},
		{name: "COMMIT AND CHAIN committed", eff: single(classify.TxKindCommitAndChain, classify.TxEnd),
			out: exchangeOutcome{txStatus: wire.TxInBlock, committed: true}, wantFate: pendingSettled, wantCommitted: true},
		{name: "ROLLBACK AND CHAIN did not commit", eff: single(classify.TxKindRollbackAndChain, classify.TxEnd),
			out: exchangeOutcome{txStatus: wire.TxInBlock, committed: true}, wantFate: pendingSettled},
		{name: "a string with transaction control that leaves a transaction open",
			eff: classify.Effects{Statements: 2, Tx: classify.TxEnd}, out: exchangeOutcome{txStatus: wire.TxInBlock}, wantFate: pendingKeptUncertain},
		{name: "a string without transaction control", eff: classify.Effects{Statements: 2},
			out: exchangeOutcome{txStatus: wire.TxInBlock}, wantFate: pendingKept},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fate, committed := settleFate(tc.eff, &tc.out, tc.followed)
			if fate != tc.wantFate || committed != tc.wantCommitted {
				t.Fatalf("fate %d committed %v, want %d %v", fate, committed, tc.wantFate, tc.wantCommitted)
			}
		})
	}
}

func TestSessionHoldsItsBackendAfterAnOutcome(t *testing.T) {
	cases := []struct {
		pinned, openBatch bool
		status            byte
		want              bool
	}{
		{status: wire.TxIdle, want: false},
		{status: wire.TxInBlock, want: true},
		{status: wire.TxFailed, want: true},
		{pinned: true, status: wire.TxIdle, want: true},
		{openBatch: true, status: wire.TxIdle, want: true},
	}
	for _, tc := range cases {
		if got := holdsBackend(tc.pinned, tc.openBatch, tc.status); got != tc.want {
			t.Errorf("pinned %v, open batch %v, status %q: holds %v, want %v", tc.pinned, tc.openBatch, tc.status, got, tc.want)
		}
	}
}
