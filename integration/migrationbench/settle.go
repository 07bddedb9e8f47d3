package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// Between two runs the benchmark changes the catalogue past pgowl: it drops the schema of the run
// before and makes the next one on the primary itself (in the target's own database since
// c56f322; before, a direct run, or PgBouncer's, also made its 600 objects in the database pgowl
// served). pgowl finds such changes by polling the primary's change markers
// (classify.change_poll_interval, 1s by default) and reads what they name in the background: a
// made or dropped schema, or a dropped function, is a change of everything, a whole catalogue read
// of 30-100 ms of the node's CPU. Without a wait, that read falls into whichever run comes next,
// pgowl's or the direct one, on a node that may have one CPU (-node-cpus): the PostgreSQL log of a
// sitting showed 9-43 ms of pgowl's catalogue statements inside single runs of 200-630 ms, in
// both targets' runs. A migration sent through pgowl makes no such changes beside it, so before
// each run the benchmark waits for them to be taken in (settler), unless -settle=false.

// quietChecks is how many checks in a row must find no other session at work on the node.
const quietChecks = 3

// quietCheckEvery is the pause between two checks.
const quietCheckEvery = 30 * time.Millisecond

// settleBound bounds the wait for a quiet node after the poll interval.
const settleBound = 5 * time.Second

// busySessionsQuery counts the client sessions other than its own that are not idle: running a
// statement, or inside a transaction (a catalogue read's statements run in one).
const busySessionsQuery = `SELECT count(*) FROM pg_catalog.pg_stat_activity
 WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid() AND state <> 'idle'`

// settler waits, before a run, for the node to be done with what the benchmark changed past
// pgowl: first a poll interval (and a margin), so that pgowl's poll has found the change, then
// until quietChecks checks in a row find no other session at work. It counts the waits that ran
// past settleBound, for the report.
type settler struct {
	conn     *pgx.Conn
	interval time.Duration
	waits    int
	timedOut int
}

// newSettler opens the superuser connection the checks run on.
func newSettler(ctx context.Context, primary *cluster.Node) (*settler, error) {
	conn, err := primary.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &settler{conn: conn, interval: config.Default().Classify.ChangePollInterval}, nil
}

// settle waits as the type says.
func (s *settler) settle(ctx context.Context) error {
	s.waits++
	select {
	case <-time.After(s.interval + s.interval/5):
	case <-ctx.Done():
		return ctx.Err()
	}
	deadline := time.Now().Add(settleBound)
	for quiet := 0; quiet < quietChecks; {
		if time.Now().After(deadline) {
			s.timedOut++
			return nil
		}
		var busy int
		if err := s.conn.QueryRow(ctx, busySessionsQuery).Scan(&busy); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		if busy == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(quietCheckEvery)
	}
	return nil
}

// close closes the checks' connection.
func (s *settler) close() {
	s.conn.Close(context.Background())
}

// describe is the report's sentence on the waits.
func (s *settler) describe() string {
	if s == nil {
		return "Runs follow each other without a wait (`-settle=false`): pgowl's reads of what the benchmark changed past it between runs (the schemas it drops and makes on the primary) fall into the next run, whichever target it is."
	}
	text := fmt.Sprintf("Before each run the benchmark waits for the node to be quiet: a change-poll interval (%s) and a fifth, then until %d checks %s apart find no other session at work, so that pgowl's reads of what the benchmark changed past it between runs (the schema it drops and the one it makes on the primary) do not fall into the next run, whichever target it is (`-settle=false` leaves the wait out).",
		s.interval, quietChecks, quietCheckEvery)
	if s.timedOut > 0 {
		text += fmt.Sprintf(" %d of %d waits ended at their bound (%s) with the node still busy.", s.timedOut, s.waits, settleBound)
	}
	return text
}
