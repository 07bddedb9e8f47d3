package proxy

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/pgowl/pgowl/pool"
	"github.com/pgowl/pgowl/route"
	"github.com/pgowl/pgowl/wire"
)

// scriptedBackend is a backend whose node answers with the frames of
// replies, and whose writes go to sent.
func scriptedBackend(replies []byte, sent *bytes.Buffer) *backend {
	return &backend{node: "n1", conn: &pool.Conn{
		Reader:   wire.NewReader(bytes.NewReader(replies), 4096, 1<<20),
		Writer:   bufio.NewWriter(sent),
		TxStatus: wire.TxIdle,
	}}
}

// TestPgowlsOwnQueryDropsTheUnnamedStatement: a statement pgowl runs for the
// session (runOnBackend: the settings replay, ROLLBACK, DISCARD ALL, pin
// checks) is a simple Query, and PostgreSQL drops the unnamed statement at
// every simple Query. The connection's mark of its unnamed statement must go
// with it: left set, the next Bind of that statement is sent without the
// Parse it needs, and fails with 26000 or runs another statement.
func TestPgowlsOwnQueryDropsTheUnnamedStatement(t *testing.T) {
	var sent, out bytes.Buffer
	sess := relaySession(&out)
	be := scriptedBackend(wireReady(wire.AppendFrame(nil, wire.MsgCommandComplete, []byte("SET\x00")), wire.TxIdle), &sent)
	be.markUnnamed(42)
	if be.unnamedID() != 42 {
		t.Fatalf("the connection's unnamed statement is %d right after it was marked 42", be.unnamedID())
	}
	if code, err := sess.runOnBackend(be, "SET work_mem = '8MB'", nil); err != nil || code != "" {
		t.Fatalf("runOnBackend: %q, %v", code, err)
	}
	if sent.Len() == 0 || sent.Bytes()[0] != wire.MsgQuery {
		t.Fatalf("runOnBackend sent %q, want a simple Query", sent.Bytes())
	}
	if id := be.unnamedID(); id != 0 {
		t.Fatalf("after a simple Query the connection still records statement %d as its unnamed statement", id)
	}
}

// TestHealthCheckQueryDropsTheUnnamedStatement: the pool's health check is an
// empty simple Query written while the connection is idle in the pool; the
// proxy's mark, kept with the connection, no longer holds afterwards.
func TestHealthCheckQueryDropsTheUnnamedStatement(t *testing.T) {
	var sent bytes.Buffer
	be := scriptedBackend(nil, &sent)
	be.markUnnamed(7)
	be.conn.WriteQuery("") // what pool.checkAlive writes
	if id := be.unnamedID(); id != 0 {
		t.Fatalf("after the health check's Query the connection records statement %d as its unnamed statement", id)
	}
	be.markUnnamed(8)
	be.conn.WriteQueryBody([]byte("SELECT 1\x00")) // a client's Query
	if id := be.unnamedID(); id != 0 {
		t.Fatalf("after a client's Query the connection records statement %d as its unnamed statement", id)
	}
}

// TestSkippedUnnamedParseRestoresTheMark: an unnamed Parse the node skipped
// leaves the statement before it, unless a simple Query dropped that one
// meanwhile.
func TestSkippedUnnamedParseRestoresTheMark(t *testing.T) {
	var sent bytes.Buffer
	be := scriptedBackend(nil, &sent)
	be.markUnnamed(1)
	replaced := be.markUnnamed(2)
	be.restoreUnnamed(replaced)
	if id := be.unnamedID(); id != 1 {
		t.Fatalf("after a skipped Parse the unnamed statement is %d, want 1", id)
	}
	replaced = be.markUnnamed(2)
	be.conn.WriteQuery("")
	be.restoreUnnamed(replaced)
	if id := be.unnamedID(); id != 0 {
		t.Fatalf("a mark from before a simple Query came back as %d", id)
	}
}

// TestStatementRecordStaysWithTheConnection: what one session prepared on a
// connection is known to the next session that gets the connection from the
// pool (a new backend struct over the same pool.Conn), and a reset (DISCARD
// ALL) forgets it for every later session too.
func TestStatementRecordStaysWithTheConnection(t *testing.T) {
	c := &pool.Conn{Node: "n1"}
	var first, second backendSet
	a := first.add(c, "n1", route.RolePrimary)
	a.statements().add("pgowl_x")
	a.markUnnamed(9)
	first.forget(a)
	first.keepSpare(a)

	b := second.add(c, "n1", route.RolePrimary)
	if !b.statements().holds("pgowl_x") || b.unnamedID() != 9 {
		t.Fatalf("the next session's backend does not know what the connection holds: prepared %v, unnamed %d",
			b.statements().prepared, b.unnamedID())
	}
	if _, ok := c.Attached.(*connRecord); !ok {
		t.Fatalf("the record is not kept with the connection (Attached is %T)", c.Attached)
	}
	*settingsOn(c) = knownSettings("k")
	b.reset()
	if b.statements().count() != 0 || b.unnamedID() != 0 || *settingsOn(c) != (connSettings{}) {
		t.Fatalf("after reset the connection still records prepared %v, unnamed %d, settings %+v",
			b.statements().prepared, b.unnamedID(), *settingsOn(c))
	}
	if fresh := (&backend{conn: &pool.Conn{}}); fresh.statements().count() != 0 || fresh.unnamedID() != 0 {
		t.Fatal("a new connection records statements it never had")
	}
}

// TestRefusedUnnamedParseLeavesNoUnnamedStatement: the relay undoes an
// unnamed Parse the node refused: PostgreSQL dropped the old unnamed
// statement before it parsed, so neither the connection nor the client has
// one; the client's named statements are untouched.
func TestRefusedUnnamedParseLeavesNoUnnamedStatement(t *testing.T) {
	var stream []byte
	stream = wire.AppendFrame(stream, wire.MsgErrorResponse, []byte("SERROR\x00VERROR\x00C42601\x00Msyntax error\x00\x00"))
	stream = wireReady(stream, wire.TxIdle)
	var out, sent bytes.Buffer
	sess := relaySession(&out)
	var names managedNames
	old, bad, ps := parsed(t, &names, "", "SELECT 1"), parsed(t, &names, "", "SELEC 2"), parsed(t, &names, "ps", "SELECT 3")
	sess.statements.parse(old)
	sess.statements.parse(ps)
	be := scriptedBackend(stream, &sent)
	be.markUnnamed(old.id)
	be.expect.push(expectation{typ: wire.MsgParse, unnamed: true, prevUnnamed: be.markUnnamed(bad.id), clientOwn: true,
		clientPrev: sess.statements.parse(bad), stmt: bad})
	be.expect.push(expectation{typ: wire.MsgSync})
	u := unit{}
	outcome, err := sess.relay(be, &u)
	if err != nil {
		t.Fatal(err)
	}
	if outcome.errCode != "42601" {
		t.Fatalf("unit error %q, want 42601", outcome.errCode)
	}
	if id := be.unnamedID(); id != 0 {
		t.Errorf("the connection records statement %d as its unnamed statement after a refused unnamed Parse", id)
	}
	if st := sess.statements.lookup(""); st != nil {
		t.Errorf("the client still has unnamed statement %q after a refused unnamed Parse", st.sql)
	}
	if sess.statements.lookup("ps") != ps {
		t.Error("a refused unnamed Parse changed the client's named statement")
	}
}
