package integration

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestAGuardMatchesTheApplicationNameGivenInStartupOptions: a client that names itself in its
// startup options (options=-c application_name=..., as PGOPTIONS gives it) has that
// application_name from its login on: the node reports it in the startup ParameterStatus the
// client gets, and pg_stat_activity shows it. A guard on application_names matches the session's
// application_name as it is when a statement comes, so it matches this one from the first
// statement, as it does once the session sets the name by SET.
func TestAGuardMatchesTheApplicationNameGivenInStartupOptions(t *testing.T) {
	o := startReportsGuardOwl(t, sharedClusterFor(t), nil)
	ctx := timeoutCtx(t, statementTimeout)
	conn := o.connect(t, func(cfg *pgx.ConnConfig) {
		withMode(pgx.QueryExecModeSimpleProtocol)(cfg)
		delete(cfg.RuntimeParams, "application_name")
		cfg.RuntimeParams["options"] = "-c application_name=report-daily"
	})
	if got := conn.PgConn().ParameterStatus("application_name"); got != "report-daily" {
		t.Fatalf("the client's application_name at login is %q, want report-daily (the startup options')", got)
	}
	var shown string
	if err := conn.QueryRow(ctx, "SHOW application_name").Scan(&shown); err != nil || shown != "report-daily" {
		t.Fatalf("SHOW application_name: %q, %v; want report-daily", shown, err)
	}
	_, err := conn.Exec(ctx, guardBigHeavyRead)
	if pgErr := wantSQLState(t, "a heavy read of a session named report-daily by its startup options", err, "54001"); pgErr != nil && !strings.HasPrefix(pgErr.Detail, "guard=reports ") {
		t.Errorf("DETAIL %q, want the reports guard", pgErr.Detail)
	}
}
