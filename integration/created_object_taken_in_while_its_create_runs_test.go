package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// While the node runs a CREATE whose statement says all of the object, the session derives the
// catalogue with the object in it and analyses its uses there (catalog.Manager.PrepareTake); the
// catalogue is stored once the CREATE has committed. With standbys to read on, the statement
// right after the CREATE waits for the object to be taken in before it is routed: it finds the
// prepared catalogue stored, and its verdict is a read. A CREATE that fails on the node never has
// its catalogue stored: a call of the function it would have made is routed as a call of a
// function the catalogue does not hold, never as the read the failed body would have been.
func TestCreatedObjectIsTakenInWhileItsCreateRuns(t *testing.T) {
	_, o := setupAndStart(t, "prepared takes", aheadSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
	})
	for _, mode := range bothProtocols {
		t.Run(mode.name, func(t *testing.T) {
			conn := o.connect(t, withMode(mode.mode))
			aheadMust(t, conn, "SET search_path = sa_app, public")
			aheadMust(t, conn, "SELECT sa_probe()") // the catalogue is read, and held
			conn.routes(t)
			prepared := preparedTakes(t, o)
			reads := "pt_reads_" + mode.name
			aheadMust(t, conn, "CREATE FUNCTION "+reads+"(x integer) RETURNS integer LANGUAGE sql STABLE AS $$ SELECT x + sa_probe() $$")
			conn.routes(t)
			aheadMust(t, conn, "SELECT "+reads+"(1)")
			// A read: on a standby that has replayed the CREATE, or on the primary for the
			// session's own write (read_your_writes) while none has.
			if rs := conn.routes(t); len(rs) != 1 || !(rs[0].Role == "standby" && rs[0].Reason == "READ_ONLY" ||
				rs[0].Role == "primary" && rs[0].Reason == "READ_YOUR_WRITES") {
				t.Errorf("SELECT %s(1) right after its CREATE: NOTICEs %v, want one that says it reads", reads, rs)
			}
			if got := preparedTakes(t, o) - prepared; got != 1 {
				t.Errorf("%d catalogue changes stored as prepared while the CREATE ran; want 1", got)
			}

			// A CREATE the node refuses, naming nothing the catalogue lacks: its body's
			// constant is no integer.
			failed := "pt_failed_" + mode.name
			ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
			err := runToEnd(ctx, conn, "CREATE FUNCTION "+failed+"() RETURNS integer LANGUAGE sql STABLE AS $$ SELECT 'a' + sa_probe() $$")
			cancel()
			if err == nil {
				t.Fatalf("CREATE FUNCTION %s with a body that adds 'a' to an integer succeeded", failed)
			}
			conn.routes(t)
			ctx, cancel = context.WithTimeout(context.Background(), statementTimeout)
			err = runToEnd(ctx, conn, "SELECT "+failed+"()")
			cancel()
			if err == nil {
				t.Errorf("SELECT %s(): succeeded, but the function was never made", failed)
			}
			// The simple protocol runs the call, and its NOTICE says where: the primary, for a
			// function the catalogue does not hold (the extended one fails at its Parse, which
			// runs nothing and has no NOTICE).
			if rs := conn.routes(t); mode.mode == pgx.QueryExecModeSimpleProtocol && (len(rs) != 1 || rs[0].Role != "primary" || rs[0].Reason == "READ_ONLY" || rs[0].Reason == "READ_YOUR_WRITES") {
				t.Errorf("SELECT %s() after its CREATE failed: NOTICEs %v, want one on the primary (a function the catalogue does not hold)", failed, rs)
			}
		})
	}
}

// preparedTakes counts pgowl's debug lines for catalogue changes stored as the session prepared
// them while the node ran the statement that made them.
func preparedTakes(t *testing.T, o *owl) int {
	t.Helper()
	return catalogueChangesWhere(t, o, "prepared")
}
