package catalog

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
)

// TestSessionReadPatchIsWaitedForByTheNextStatement runs what a session does on a real primary: a
// change (CREATE FUNCTION, then CREATE OR REPLACE making it write), its read sent on the same
// connection right behind it, the replies passed to the read, and ChangedAndRead. The patch runs
// beside the caller; the statement classified right after it must see the change every time
// (never the catalogue before it), and the manager must not read anything itself, also when
// every other CREATE OR REPLACE comes right behind the CREATE, without a use between them.
func TestSessionReadPatchIsWaitedForByTheNextStatement(t *testing.T) {
	primary, ctx := startPrimaryForTest(t, 3*time.Minute)
	session := connectForTest(t, ctx, primary)
	if _, err := session.Exec(ctx, "CREATE TABLE audit (msg text)"); err != nil {
		t.Fatal(err)
	}
	var connects atomic.Int32
	m := New(Options{Logger: zerolog.Nop(), Connect: func(ctx context.Context, database string) (*pgx.Conn, error) {
		connects.Add(1)
		return pgx.Connect(ctx, primary.DatabaseDSN(database))
	}})
	classifier := classify.New(classify.Options{Catalogues: m})
	ctxOf := &classify.Context{Database: "postgres", User: "postgres", SearchPath: []string{"public"}}
	if got := classifier.ClassifyIn("SELECT 1 FROM audit", ctxOf); got.Access != classify.Read {
		t.Fatalf("first statement: %v %s", got.Access, got.Subject)
	}
	loaded := connects.Load()
	prepared := map[string]struct{}{}
	raw := session.PgConn()
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("f_%d", i)
		for _, step := range []struct {
			sql  string
			want classify.Access
		}{
			{fmt.Sprintf("CREATE FUNCTION %s() RETURNS bigint LANGUAGE sql STABLE AS $$ SELECT count(*) FROM audit $$", name), classify.Read},
			{fmt.Sprintf("CREATE OR REPLACE FUNCTION %s() RETURNS bigint LANGUAGE sql VOLATILE AS $$ INSERT INTO audit VALUES ('x') RETURNING 1 $$", name), classify.Write},
		} {
			effects := classifier.ClassifyIn(step.sql, ctxOf)
			if !effects.CatalogueChange || effects.CatalogueChanges == nil {
				t.Fatalf("%s: no named catalogue change", step.sql)
			}
			read := m.PrepareSessionRead("postgres", effects.CatalogueChanges)
			if read == nil {
				t.Fatalf("%s: no session read", step.sql)
			}
			// The change and its read in one write, as the proxy sends them.
			query := (&pgproto3.Query{String: step.sql})
			out, err := query.Encode(nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Conn().Write(append(out, read.Messages(prepared)...)); err != nil {
				t.Fatal(err)
			}
			receive(t, ctx, raw, nil) // the change's replies, to its ReadyForQuery
			receive(t, ctx, raw, read)
			if !m.ChangedAndRead("postgres", effects.CatalogueChanges, read) {
				t.Fatalf("%s: the session's read was not used (%v)", step.sql, read.Err())
			}
			if i%2 == 1 && step.want == classify.Read {
				// A change right behind a change: the next one is classified (without waiting)
				// while this patch may still run, and its own read must still serve it.
				continue
			}
			use := fmt.Sprintf("SELECT %s() /* %d */", name, len(step.sql))
			if got := classifier.ClassifyIn(use, ctxOf); got.Access != step.want {
				t.Fatalf("after %q: %s classified %v (%s), want %v: classified against a catalogue that misses the change",
					step.sql, use, got.Access, got.Subject, step.want)
			}
		}
	}
	if got := connects.Load(); got != loaded {
		t.Errorf("the manager connected %d more time(s): the session's reads should have served every change", got-loaded)
	}
}

// replySource is a connection whose reply messages a test reads one by one (pgconn.PgConn).
type replySource interface {
	ReceiveMessage(context.Context) (pgproto3.BackendMessage, error)
}

// receive passes the connection's reply messages up to a ReadyForQuery to read (nil: discards them).
func receive(t testing.TB, ctx context.Context, conn replySource, read *SessionRead) {
	t.Helper()
	if read != nil {
		if err := passReplies(ctx, conn, read); err != nil {
			t.Fatal(err)
		}
		return
	}
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			t.Fatalf("the change failed: %s", e.Message)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			return
		}
	}
}

// passReplies passes the connection's reply frames to read up to its ReadyForQuery: what the proxy
// does with a session read's replies. It may run outside the test's goroutine.
func passReplies(ctx context.Context, conn replySource, read *SessionRead) error {
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return err
		}
		frame, err := msg.Encode(nil)
		if err != nil {
			return err
		}
		if read.Receive(frame[0], frame[5:]) {
			return nil
		}
	}
}
