package proxy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestAStatementsLoginRefusalIsAnError: a node's FATAL refusal of the login a statement needed
// reaches the client as an ERROR with the node's code, naming the node; other errors pass as
// they are.
func TestAStatementsLoginRefusalIsAnError(t *testing.T) {
	fatal := fmt.Errorf("dial pg2: %w", &pgconn.PgError{Severity: "FATAL", Code: "55000", Message: `database "x" is not currently accepting connections`})
	var ce *clientError
	if got := statementLoginRefusal(fatal, "pg2"); !errors.As(got, &ce) || ce.Severity != "" || ce.SQLState != "55000" ||
		ce.Message != `pgowl: pg2 refused the connection this statement needed: database "x" is not currently accepting connections` {
		t.Errorf("a FATAL login refusal: %#v", got)
	}
	if resp := toErrorResponse(statementLoginRefusal(fatal, "")); resp.Severity != "ERROR" {
		t.Errorf("sent with severity %q, want ERROR", resp.Severity)
	}
	plain := errors.New("connection refused")
	if got := statementLoginRefusal(plain, "pg2"); got != plain {
		t.Errorf("another error was changed: %v", got)
	}
	asError := &pgconn.PgError{Severity: "ERROR", Code: "53300"}
	if got := statementLoginRefusal(asError, "pg2"); got != error(asError) {
		t.Errorf("an ERROR was changed: %v", got)
	}
}
