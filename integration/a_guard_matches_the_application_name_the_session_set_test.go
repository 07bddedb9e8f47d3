package integration

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestAGuardMatchesTheApplicationNameTheSessionSet: a guard's application_names match the
// session's application_name as it is when a statement comes, as pg_stat_activity shows it, not
// only the startup one: after SET application_name, set_config, SET LOCAL until its block
// ends, and RESET. SHOW CLIENTS shows it; the log keeps the login's (a name set later is a
// value of a statement, which no log shows). A refusal
// that aborts the block reverts a SET LOCAL as a failure on the node does, and the client is told.
func TestAGuardMatchesTheApplicationNameTheSessionSet(t *testing.T) {
	o := startReportsGuardOwl(t, sharedClusterFor(t), func(cfg *config.Config) { cfg.Admin.Users = []string{appUser} })
	ctx := timeoutCtx(t, statementTimeout)
	conn := connectAsShop(t, o)
	const heavy = guardBigHeavyRead
	runs := func(what string) {
		t.Helper()
		if _, err := conn.Exec(ctx, heavy); err != nil {
			t.Errorf("%s: the heavy read was refused: %v", what, err)
		}
	}
	refused := func(what string) {
		t.Helper()
		_, err := conn.Exec(ctx, heavy)
		if pgErr := wantSQLState(t, what, err, "54001"); pgErr != nil && !strings.HasPrefix(pgErr.Detail, "guard=reports ") {
			t.Errorf("%s: DETAIL %q, want the reports guard", what, pgErr.Detail)
		}
	}
	exec := func(sql string) {
		t.Helper()
		execOrFail(t, ctx, conn, sql)
	}

	runs("started as shop")
	exec("SET application_name = 'report-daily'")
	refused("after SET application_name = 'report-daily'")
	// The admin side's list of clients shows the name now, as pg_stat_activity does; the log
	// keeps the login's, since a name set later is a value of a statement.
	admin, err := pgx.Connect(ctx, o.dsn(appUser, appPassword, config.AdminDatabase, url.Values{"default_query_exec_mode": {"simple_protocol"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var listed []string
	rows, err := admin.Query(ctx, "SHOW CLIENTS")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		values, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range rows.FieldDescriptions() {
			if f.Name == "application_name" {
				listed = append(listed, fmt.Sprint(values[i]))
			}
		}
	}
	if rows.Close(); !slices.Contains(listed, "report-daily") {
		t.Errorf("SHOW CLIENTS lists the applications %q, want report-daily among them", listed)
	}
	if logs := o.logs.String(); strings.Contains(logs, "report-daily") || !strings.Contains(logs, `"application_name":"shop"`) {
		t.Errorf("the log shows a name the session set, or not the login's:\n%s", logs)
	}
	exec("RESET application_name")
	runs("after RESET application_name")

	exec("SELECT set_config('application_name', 'report-weekly', false)")
	refused("after set_config('application_name', 'report-weekly', false)")
	exec("SET application_name = 'shop'")
	runs("after SET application_name = 'shop'")

	exec("BEGIN")
	exec("SET LOCAL application_name = 'report-adhoc'")
	refused("inside the block, after SET LOCAL application_name = 'report-adhoc'")
	// The refusal aborted the block, as a failure on the node does: the node reverted the name
	// and said so, and so does pgowl (a direct connection gets ParameterStatus shop here).
	if got := conn.PgConn().ParameterStatus("application_name"); got != "shop" {
		t.Errorf("after the refusal aborted the block: the client's application_name is %q, want shop", got)
	}
	exec("ROLLBACK")
	runs("after the block with SET LOCAL rolled back")
}
