package proxy

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

func TestPinsTakenAddOnlyNewKinds(t *testing.T) {
	var p sessionPins
	if p.pinned() {
		t.Fatal("a new session is pinned")
	}
	if added := p.take(classify.SessionListen | classify.SessionSet); added != classify.SessionListen {
		t.Fatalf("take added %v, want LISTEN only (SET does not pin)", added)
	}
	if added := p.take(classify.SessionListen | classify.SessionTempTable); added != classify.SessionTempTable {
		t.Fatalf("take added %v, want the temporary table only", added)
	}
	if added := p.take(classify.SessionListen); added != 0 {
		t.Fatalf("taking a held kind again added %v", added)
	}
	if !p.pinned() || !p.has(classify.SessionListen) || p.has(classify.SessionAdvisoryLock) {
		t.Fatalf("pins %v", p.kinds)
	}
	if got := p.route(); got != route.PinListen|route.PinTempTable {
		t.Fatalf("route pins %v", got)
	}
}

func TestPinsReleasedAllByDiscardAndLostBackend(t *testing.T) {
	var p sessionPins
	p.take(classify.SessionAdvisoryLock | classify.SessionSetRole)
	if released := p.releaseAll(); released != classify.SessionAdvisoryLock|classify.SessionSetRole || p.pinned() {
		t.Fatalf("DISCARD ALL released %v, left %v", released, p.kinds)
	}
	p.take(classify.SessionListen)
	p.recheck = true
	p.lost()
	if p.pinned() || !p.recheckDue() {
		t.Fatalf("a lost backend left pins %v, recheck due %v; want no pin and the recheck still due", p.kinds, p.recheckDue())
	}
}

// TestPinsRecheckWhenStateMayHaveChanged lists the units after which the
// node must be asked what pins remain, and some after which it must not.
func TestPinsRecheckWhenStateMayHaveChanged(t *testing.T) {
	cases := []struct {
		name   string
		pinned classify.SessionEffect
		unit   unit
		status byte
		want   bool
	}{
		{name: "a plain read", unit: unit{effects: classify.Effects{Access: classify.Read}}, status: wire.TxIdle},
		{name: "unknown effects (DO)", unit: unit{effects: classify.Effects{Session: classify.SessionUnknown}}, status: wire.TxIdle, want: true},
		{name: "unknown effects, but nothing ran", unit: unit{runsNothing: true, effects: classify.Effects{Session: classify.SessionUnknown}}, status: wire.TxIdle},
		{name: "a release while pinned", pinned: classify.SessionListen,
			unit: unit{effects: classify.Effects{Session: classify.SessionRelease}}, status: wire.TxIdle, want: true},
		{name: "a release while unpinned",
			unit: unit{effects: classify.Effects{Session: classify.SessionRelease}}, status: wire.TxIdle},
		{name: "a release while pinned only by what cannot be checked", pinned: classify.SessionSerializableDefault,
			unit: unit{effects: classify.Effects{Session: classify.SessionRelease}}, status: wire.TxIdle},
		{name: "a pinning unit that failed (a lock survives the error)",
			unit: unit{outcome: exchangeOutcome{errCode: "42P01"}, effects: classify.Effects{Session: classify.SessionAdvisoryLock}}, status: wire.TxIdle, want: true},
		{name: "a rollback while pinned", pinned: classify.SessionTempTable,
			unit: unit{effects: classify.Effects{Tx: classify.TxEnd}}, status: wire.TxIdle, want: true},
		{name: "a commit while pinned", pinned: classify.SessionTempTable,
			unit: unit{outcome: exchangeOutcome{committed: true}, effects: classify.Effects{Tx: classify.TxEnd}}, status: wire.TxIdle},
		{name: "a BEGIN while pinned: still in the block", pinned: classify.SessionTempTable,
			unit: unit{effects: classify.Effects{Tx: classify.TxBegin}}, status: wire.TxInBlock},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := sessionPins{kinds: tc.pinned}
			p.noteUnit(&tc.unit, tc.status)
			if p.recheckDue() != tc.want {
				t.Fatalf("recheck due %v, want %v", p.recheckDue(), tc.want)
			}
			// A later unit that changes nothing does not clear a due recheck.
			p.noteUnit(&unit{effects: classify.Effects{Access: classify.Read}}, wire.TxIdle)
			if p.recheckDue() != tc.want {
				t.Fatalf("a later read changed the recheck to %v", p.recheckDue())
			}
		})
	}
}

func TestPinsCheckedOnlyBetweenTransactionsAndOnce(t *testing.T) {
	p := sessionPins{recheck: true}
	if p.checkDue(false) {
		t.Fatal("checked inside a transaction")
	}
	if !p.recheckDue() {
		t.Fatal("a check not yet run is no longer due")
	}
	if !p.checkDue(true) {
		t.Fatal("not checked between transactions")
	}
	if p.recheckDue() || p.checkDue(true) {
		t.Fatal("checked twice for one change")
	}
}

func TestPinsSettledByTheNodesAnswer(t *testing.T) {
	p := sessionPins{kinds: classify.SessionListen | classify.SessionAdvisoryLock | classify.SessionSerializableDefault}
	added, released := p.settle(classify.SessionAdvisoryLock | classify.SessionTempTable)
	if added != classify.SessionTempTable {
		t.Errorf("added %v, want the temporary table the node reports", added)
	}
	if released != classify.SessionListen {
		t.Errorf("released %v, want LISTEN, which the node no longer has", released)
	}
	// A serializable default cannot be checked: it stays.
	want := classify.SessionAdvisoryLock | classify.SessionTempTable | classify.SessionSerializableDefault
	if p.kinds != want {
		t.Errorf("pins %v, want %v", p.kinds, want)
	}
	if added, released := p.settle(0); added != 0 || released != classify.SessionAdvisoryLock|classify.SessionTempTable || p.kinds != classify.SessionSerializableDefault {
		t.Errorf("nothing left on the node: added %v, released %v, left %v", added, released, p.kinds)
	}
}

// dataRow builds a DataRow body of text values.
func dataRow(values ...string) []byte {
	body := binary.BigEndian.AppendUint16(nil, uint16(len(values)))
	for _, v := range values {
		body = binary.BigEndian.AppendUint32(body, uint32(len(v)))
		body = append(body, v...)
	}
	return body
}

func TestPinCheckQueryAndAnswer(t *testing.T) {
	q := pinCheckQuery("o'brien")
	if !strings.HasPrefix(q, "SELECT ") || !strings.Contains(q, "session_user OPERATOR(pg_catalog.=) E'o''brien')") {
		t.Fatalf("query does not compare with the quoted login: %s", q)
	}
	if n := strings.Count(q, "EXISTS (SELECT FROM pg_catalog.pg_"); n < len(pinChecks)-1 {
		t.Fatalf("query asks %d questions, want one per kind of pin: %s", n, q)
	}
	values := make([]string, len(pinChecks))
	var want classify.SessionEffect
	for i, c := range pinChecks {
		values[i] = "f"
		if c.bit == classify.SessionListen || c.bit == classify.SessionSetRole {
			values[i] = "t"
			want |= c.bit
		}
	}
	if got, ok := pinCheckAnswer(dataRow(values...)); !ok || got != want {
		t.Fatalf("answer %v, %v; want %v", got, ok, want)
	}
	if _, ok := pinCheckAnswer(dataRow("t")); ok {
		t.Fatal("a row with one column taken for the check's answer")
	}
}
