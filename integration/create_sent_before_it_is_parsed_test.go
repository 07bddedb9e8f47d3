package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/classify"
)

// beforeParseLogMessage is pgowl's debug line for a unit sent before its statement was parsed.
const beforeParseLogMessage = "statement sent before it was parsed; classified while the node ran it"

// A CREATE of a function, type or view in an idle session is sent to the primary before pgowl
// parses it, and classified while the node runs it: its NOTICE and routing log line still give
// the final verdict (WRITE, with its statement's normalised text and fingerprint), the object it
// makes is taken into the catalogue as before (the next statement's verdict follows it), with
// standbys configured as well as without. Inside a transaction block it is parsed first, as
// before. A CREATE the node refuses, or that does not parse, reaches the client as the node's
// error, and the session goes on.
func TestCreateSentBeforeItIsParsed(t *testing.T) {
	c := sharedClusterFor(t)
	alone := startOwlOnPrimaryAlone(t, c, aheadSetupSQL)
	for _, mode := range bothProtocols {
		t.Run(mode.name, func(t *testing.T) {
			conn := alone.connect(t, withMode(mode.mode))
			aheadMust(t, conn, "SET search_path = sa_app, public")
			aheadMust(t, conn, "SELECT sa_probe()")
			conn.routes(t)
			before, createdBefore := beforeParseLines(t, alone), createdWithoutRead(t, alone)
			writes, reads := "sp_w_"+mode.name, "sp_r_"+mode.name
			steps := []struct{ change, use, reason string }{
				{"CREATE FUNCTION " + writes + "() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('sa_app.sa_seq')$$",
					"SELECT " + writes + "()", "WRITING_FUNCTION"},
				{"create or replace function " + reads + "() returns bigint language plpgsql stable as $$ begin return 1; end $$;",
					"SELECT " + reads + "()", "NO_STANDBY_CONFIGURED"},
				{"CREATE TYPE sp_t_" + mode.name + " AS (a integer, b text)",
					"SELECT (ROW(1, 'x')::sp_t_" + mode.name + ").a", "NO_STANDBY_CONFIGURED"},
				{"CREATE VIEW sp_v_" + mode.name + " AS SELECT " + writes + "() AS n",
					"SELECT n FROM sp_v_" + mode.name, "WRITING_FUNCTION"},
			}
			for _, step := range steps {
				aheadMust(t, conn, step.change)
				if got := conn.oneRoute(t, step.change); got.Role != "primary" || got.Reason != "WRITE" {
					t.Errorf("%s: NOTICE %v, want the primary with WRITE", step.change, got)
				}
				line, ok := routingLineOf(t, alone, step.change)
				if !ok {
					t.Errorf("%s: no routing log line", step.change)
				} else if line["reason"] != "WRITE" || line["fingerprint"] == "" || line["statement"] == "" {
					t.Errorf("%s: routing log line %v, want reason WRITE with a fingerprint and the statement", step.change, line)
				}
				aheadMust(t, conn, step.use)
				if got := conn.oneRoute(t, step.use); got.Role != "primary" || got.Reason != step.reason {
					t.Errorf("%s right after %s: NOTICE %v, want the primary with %s (the verdict with the change)", step.use, step.change, got, step.reason)
				}
			}
			// pgx prepares a statement (Parse, Describe, Sync) before it binds and runs it: the
			// statement is classified at each, and goes before its parse at each.
			if sent := beforeParseLines(t, alone) - before; sent < len(steps) || (mode.name == "simple" && sent != len(steps)) {
				t.Errorf("%d units of the %d CREATEs were sent before they were parsed; want every CREATE's", sent, len(steps))
			}

			// What each CREATE makes is known once it is classified, after it was sent: the
			// catalogue takes the two functions from their statement, without a read. (A type
			// or view is read instead while a cast of a user's is held, as other tests of the
			// shared cluster leave.)
			if taken := createdWithoutRead(t, alone) - createdBefore; taken < 2 {
				t.Errorf("%d of the objects made were taken from their statement; want at least the 2 functions", taken)
			}

			// In a transaction block: parsed first.
			before = beforeParseLines(t, alone)
			aheadMust(t, conn, "BEGIN")
			aheadMust(t, conn, "CREATE FUNCTION sp_tx_"+mode.name+"() RETURNS int LANGUAGE sql VOLATILE AS $$SELECT nextval('sa_app.sa_seq')::int$$")
			aheadMust(t, conn, "COMMIT")
			if sent := beforeParseLines(t, alone) - before; sent != 0 {
				t.Errorf("a CREATE inside a transaction block was sent before it was parsed (%d lines)", sent)
			}
			aheadMust(t, conn, "SELECT sp_tx_"+mode.name+"()")
			rs := conn.routes(t)
			if got := rs[len(rs)-1]; got.Reason != "WRITING_FUNCTION" {
				t.Errorf("the function made in a transaction block: NOTICE %v, want WRITING_FUNCTION", got)
			}

			// Refused by the node, and not parsing: the node's error, and the session goes on.
			for sql, code := range map[string]string{
				"CREATE FUNCTION " + reads + "() RETURNS bigint LANGUAGE sql AS $$SELECT 2::bigint$$": "42723", // duplicate_function
				"CREATE FUNCTION sp_broken( RETURNS":                                                  "42601", // syntax_error
			} {
				ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
				err := runToEnd(ctx, conn, sql)
				cancel()
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || pgErr.Code != code {
					t.Errorf("%s: error %v, want SQLSTATE %s from the node", sql, err, code)
				}
				conn.routes(t)
				aheadMust(t, conn, "SELECT "+reads+"()")
				if got := conn.oneRoute(t, "after "+sql); got.Reason != "NO_STANDBY_CONFIGURED" {
					t.Errorf("after %s: NOTICE %v, want NO_STANDBY_CONFIGURED", sql, got)
				}
			}
		})
	}

	t.Run("with standbys", func(t *testing.T) {
		o := startOwl(t, c, readYourWritesOff)
		conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
		// Nothing here reads on a standby: another test of the shared cluster may have left one
		// behind the primary.
		aheadMust(t, conn, "SET search_path = sa_app, public")
		conn.routes(t)
		before := beforeParseLines(t, o)
		name := fmt.Sprintf("sp_standbys_%d", len(c.Nodes))
		create := "CREATE FUNCTION " + name + "() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('sa_app.sa_seq')$$"
		aheadMust(t, conn, create)
		if got := conn.oneRoute(t, create); got.Role != "primary" || got.Reason != "WRITE" {
			t.Errorf("%s: NOTICE %v, want the primary with WRITE", create, got)
		}
		if sent := beforeParseLines(t, o) - before; sent != 1 {
			t.Errorf("with standbys, the CREATE was sent before it was parsed %d times; want once", sent)
		}
		aheadMust(t, conn, "SELECT "+name+"()")
		if got := conn.oneRoute(t, "SELECT "+name+"()"); got.Role != "primary" || got.Reason != "WRITING_FUNCTION" {
			t.Errorf("SELECT %s(): NOTICE %v, want the primary with WRITING_FUNCTION", name, got)
		}
	})
}

// beforeParseLines counts pgowl's log lines for units sent before their statement was parsed.
func beforeParseLines(t *testing.T, o *owl) int {
	t.Helper()
	n := 0
	for _, e := range o.logs.Entries(t) {
		if e["message"] == beforeParseLogMessage {
			n++
		}
	}
	return n
}

// routingLineOf returns the newest routing log line of sql: the one whose statement is sql's
// normalised text, as the classifier gives it.
func routingLineOf(t *testing.T, o *owl, sql string) (map[string]any, bool) {
	t.Helper()
	normalized := classify.New(classify.Options{}).Classify(sql).Normalized
	entries := o.logs.Entries(t)
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e["message"] == "routed" && e["statement"] == normalized {
			return e, true
		}
	}
	return nil, false
}
