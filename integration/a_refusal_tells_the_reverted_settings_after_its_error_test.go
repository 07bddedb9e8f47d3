package integration

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestARefusalTellsTheRevertedSettingsAfterItsError: when pgowl refuses a statement inside a
// transaction block, it aborts the block as a failure on the node would, and the node reverts
// a SET LOCAL application_name. A node tells the client so after the ErrorResponse, right
// before ReadyForQuery; pgowl told it before its refusal's ErrorResponse.
func TestARefusalTellsTheRevertedSettingsAfterItsError(t *testing.T) {
	c := sharedClusterFor(t)
	o := startReportsGuardOwl(t, c, nil)
	exchange := func(conn *rvConn, failing string) string {
		t.Helper()
		conn.send(t, rvQuery("BEGIN"))
		conn.recv(1, 10*time.Second)
		conn.send(t, rvQuery("SET LOCAL application_name = 'report-adhoc'"))
		conn.recv(1, 10*time.Second)
		conn.send(t, rvQuery(failing))
		order := readWithParameterStatus(t, conn)
		conn.send(t, rvQuery("ROLLBACK"))
		conn.recv(1, 10*time.Second)
		return order
	}
	direct := exchange(rvLogin(t, c.Nodes[0].DSN(appUser, appPassword, appDatabase)+"&application_name=shop"), "SELECT 1/0")
	throughPgowl := exchange(rvLogin(t, o.dsn(appUser, appPassword, appDatabase, url.Values{"application_name": {"shop"}})), guardBigHeavyRead)
	const want = "E S(application_name=shop) ZE"
	if direct != want {
		t.Fatalf("directly, a failing statement in the block answered %q; want %q", direct, want)
	}
	if throughPgowl != want {
		t.Errorf("through pgowl, the refused statement in the block answered %q; want %q, as the node answers a failure", throughPgowl, want)
	}
}

// TestARefusalInABatchTellsTheRevertedSettingsAtItsSync: a message pgowl refuses in an
// extended batch inside a block (a Describe of a statement under pgowl's managed prefix that the
// session did not prepare) aborts the block; the reverted application_name is told after the
// error, with the ReadyForQuery of the batch's Sync, once, and not again with the next reply.
func TestARefusalInABatchTellsTheRevertedSettingsAtItsSync(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	conn := rvLogin(t, o.dsn(appUser, appPassword, appDatabase, url.Values{"application_name": {"shop"}}))
	conn.send(t, rvQuery("BEGIN"))
	conn.recv(1, 10*time.Second)
	conn.send(t, rvQuery("SET LOCAL application_name = 'report-adhoc'"))
	conn.recv(1, 10*time.Second)
	// Refused message, a Flush, then (separately) the Sync and a Query in one write.
	conn.send(t, rvJoin(rvDescribe('S', "pgowl_not_mine"), rvFlush))
	time.Sleep(200 * time.Millisecond)
	conn.send(t, rvJoin(rvSync, rvQuery("ROLLBACK")))
	first := readWithParameterStatus(t, conn)
	second := readWithParameterStatus(t, conn)
	if first != "E S(application_name=shop) ZE" || second != "*pgproto3.CommandComplete ZI" {
		t.Errorf("refused Describe in a block, then Sync and ROLLBACK: %q then %q; want %q then %q",
			first, second, "E S(application_name=shop) ZE", "*pgproto3.CommandComplete ZI")
	}
}

// readWithParameterStatus reads one reply up to its ReadyForQuery and returns its messages in
// order: E for an error, S(name=value) for a ParameterStatus, Z and the status, notices left out.
func readWithParameterStatus(t *testing.T, conn *rvConn) string {
	t.Helper()
	conn.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	defer conn.conn.SetReadDeadline(time.Time{})
	var order []string
	for {
		msg, err := conn.fe.Receive()
		if err != nil {
			t.Fatalf("after %q: %v", order, err)
		}
		switch m := msg.(type) {
		case *pgproto3.NoticeResponse:
		case *pgproto3.ErrorResponse:
			order = append(order, "E")
		case *pgproto3.ParameterStatus:
			order = append(order, fmt.Sprintf("S(%s=%s)", m.Name, m.Value))
		case *pgproto3.ReadyForQuery:
			return strings.Join(append(order, "Z"+string(m.TxStatus)), " ")
		default:
			order = append(order, fmt.Sprintf("%T", m))
		}
	}
}
