package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// A session's CREATE OR REPLACE that the catalogue takes from its statement (no read) is taken in
// only when the session's next statement comes. Another session may replace the same function in
// between, and commit after it: PostgreSQL then holds the other session's body. The late take-in
// must not put the first session's older body back over it (the rule a SessionRead keeps with its
// generation check). Here the first body only reads and the later one writes: a use planned with
// the older body goes to a standby and fails with 25006.
func TestALateTakeInOfAnOwnCreateDoesNotUndoALaterChange(t *testing.T) {
	c, o := setupAndStart(t, "late take-in", oaSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
	const f = "oa_app.oa_late_take"
	other := o.connect(t, nil)
	oaMust(t, other, "SELECT oa_app.oa_probe()") // the catalogue is held
	oaMust(t, other, oaSQLReader(f, 0))
	catchUp(t, c)

	// Session A replaces f by a reader; its next message's header comes with it, its body later,
	// so the take-in of A's change waits for that body.
	a := rvLogin(t, o.rvDSN())
	next := rvQuery("SELECT " + f + "()")
	// (pgowl holds A's answer back while the next message is incomplete: it is read below.)
	a.send(t, append(rvQuery(oaSQLReader(f, 1)), next[:5]...))
	deadline := time.Now().Add(10 * time.Second)
	for {
		var src string
		if err := c.Nodes[0].QueryRow(timeoutCtx(t, statementTimeout),
			"SELECT prosrc FROM pg_proc WHERE oid = '"+f+"'::regproc").Scan(&src); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(src, "+ 1 ") {
			break // A's replace committed
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's replace did not commit: %q", src)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Session B replaces f by a writer, after A committed: PostgreSQL now holds the writer.
	oaMust(t, other, oaSQLWriter(f, "late-b"))
	oaWriterUse(t, other, "B's use right after its own replace", "SELECT "+f+"()", nil)
	catchUp(t, c)

	// A's next statement comes: A's change is taken in, then the statement is classified.
	a.send(t, next[5:])
	res := a.recv(2, 10*time.Second)
	t.Logf("A: %v", res)
	for _, e := range res.errors() {
		if strings.Contains(e, "25006") {
			t.Errorf("BUG: A's use of f after its late take-in ran on a standby: %v", res)
		}
	}
	// And any session's use right after it.
	oaWriterUse(t, other, "a use right after A's late take-in", "SELECT "+f+"()", nil)
}
