package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// scriptStep is what one simple Query of a scripted session answered: the SQLSTATE of its error
// ("" for none) and the transaction status of the ReadyForQuery that ended it.
type scriptStep struct {
	sql    string
	code   string
	status byte
	tag    string
}

func (s scriptStep) String() string {
	return fmt.Sprintf("%q -> code=%q status=%c tag=%q", s.sql, s.code, s.status, s.tag)
}

// runStatementScript runs each statement string as one simple Query on conn and records what it answered.
func runStatementScript(ctx context.Context, conn *pgconn.PgConn, script []string) []scriptStep {
	var out []scriptStep
	for _, sql := range script {
		results, err := conn.Exec(ctx, sql).ReadAll()
		step := scriptStep{sql: sql, code: rvSQLState(err), status: conn.TxStatus()}
		if err != nil && step.code == "" {
			step.code = "!" + err.Error()
		}
		if len(results) > 0 {
			step.tag = results[len(results)-1].CommandTag.String()
		}
		out = append(out, step)
	}
	return out
}

// connectPgConn opens a pgconn to dsn, closed when t ends.
func connectPgConn(t *testing.T, dsn string) *pgconn.PgConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(ctx)
	})
	return conn
}

// TestARefusedManagedNameFailsTheTransaction: a statement naming a prepared statement under
// pgowl's managed prefix is refused with 26000 "as a direct connection answers for a statement
// the client never prepared". On a direct connection that error, inside a transaction block,
// aborts the block: the status turns E, later statements answer 25P02, and COMMIT rolls back.
// Through pgowl the transaction must end the same way: a row inserted before the refused
// statement must not be committed.
func TestARefusedManagedNameFailsTheTransaction(t *testing.T) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Nodes[0].Exec(ctx, `DROP TABLE IF EXISTS public.h2_refused_tx;
		CREATE TABLE public.h2_refused_tx (id int primary key, via text);
		GRANT ALL ON public.h2_refused_tx TO app;`); err != nil {
		t.Fatal(err)
	}
	o := rvOwlOnPrimaryOnly(t, c, nil)

	refusedStatements := []string{
		"EXECUTE pgowl_h2nosuch",
		"EXPLAIN EXECUTE pgowl_h2nosuch",
		"DEALLOCATE pgowl_h2nosuch",
		"SELECT 1; EXECUTE pgowl_h2nosuch",
	}
	id := 0
	for _, refused := range refusedStatements {
		for _, shape := range []string{"insert-first", "begin-then-refused"} {
			t.Run(shape+"/"+refused, func(t *testing.T) {
				run := func(dsn, via string) ([]scriptStep, int) {
					id++
					myID := id
					conn := connectPgConn(t, dsn)
					var script []string
					if shape == "insert-first" {
						script = []string{
							"BEGIN",
							fmt.Sprintf("INSERT INTO public.h2_refused_tx VALUES (%d, '%s')", myID, via),
							refused,
							"SELECT 1",
							"COMMIT",
						}
					} else {
						script = []string{
							"BEGIN",
							refused,
							fmt.Sprintf("INSERT INTO public.h2_refused_tx VALUES (%d, '%s')", myID, via),
							"COMMIT",
						}
					}
					steps := runStatementScript(ctx, conn, script)
					var n int
					if err := c.Nodes[0].QueryRow(ctx, "SELECT count(*) FROM public.h2_refused_tx WHERE id = $1", myID).Scan(&n); err != nil {
						t.Fatal(err)
					}
					return steps, n
				}
				direct, directRows := run(c.Nodes[0].DSN(appUser, appPassword, appDatabase), "direct")
				owl, owlRows := run(o.dsn(appUser, appPassword, appDatabase, nil), "pgowl")
				t.Logf("direct: %v rows=%d", direct, directRows)
				t.Logf("pgowl:  %v rows=%d", owl, owlRows)
				if directRows != 0 {
					t.Fatalf("oracle: a direct connection committed the row: %v", direct)
				}
				if owlRows != directRows {
					t.Errorf("through pgowl the transaction with the refused %q committed %d row(s); a direct connection rolls it back (its COMMIT answers ROLLBACK)", refused, owlRows)
				}
				for i := range direct {
					d, p := direct[i], owl[i]
					// pgowl's 42939 for PREPARE aside, the codes and statuses should match.
					if d.status != p.status || (d.code == "") != (p.code == "") || strings.HasPrefix(p.code, "!") {
						t.Errorf("step %d: direct %v, pgowl %v", i, d, p)
					}
				}
			})
		}
	}
}
