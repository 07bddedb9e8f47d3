package proxy

import (
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/pool"
)

// TestStatementIDsAreUniqueAcrossSessions: a backend connection remembers
// which unnamed statement it holds by id, and a Bind of a session's unnamed
// statement skips the Parse when the ids match. Two sessions' statements with
// one id would make one session run the other's SQL.
func TestStatementIDsAreUniqueAcrossSessions(t *testing.T) {
	srv := &Server{opts: Options{Classifier: classify.New(classify.Options{})}}
	const sessions, perSession = 8, 20000
	ids := make([][]uint64, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		sess := &session{srv: srv, database: "app", user: "app"}
		wg.Go(func() {
			for range perSession {
				st := sess.newStatement(parseMessage{query: "SELECT 1"}, []byte("\x00SELECT 1\x00\x00\x00"))
				ids[i] = append(ids[i], st.id)
			}
		})
	}
	wg.Wait()
	seen := make(map[uint64]int, sessions*perSession)
	for i, list := range ids {
		for _, id := range list {
			if other, dup := seen[id]; dup {
				t.Fatalf("statement id %d given to session %d and session %d", id, other, i)
			}
			seen[id] = i
		}
	}
}

// settingsSession is a session with a classifier, for the tests of how settings are recorded.
func settingsSession() *session {
	return &session{srv: &Server{opts: Options{Classifier: classify.New(classify.Options{})}}}
}

// TestCommentedResetIsRecognised: a RESET ALL with a comment is still the
// statement it is, and empties the settings a session carries.
func TestCommentedResetIsRecognised(t *testing.T) {
	for _, sql := range []string{"RESET ALL -- pool reset", "/* reset */ reset all;", "RESET\n-- x\nALL"} {
		sess := settingsSession()
		sess.settings.sets = []string{"SET work_mem = '8MB'"}
		sess.applySets(&backend{conn: &pool.Conn{}}, []string{sql})
		if len(sess.settings.sets) != 0 {
			t.Errorf("%q is not recognised as RESET ALL: the session carries %q", sql, sess.settings.sets)
		}
	}
}

func TestQuoteLiteral(t *testing.T) {
	for in, want := range map[string]string{
		"app":     `E'app'`,
		"o'brien": `E'o''brien'`,
		`a\b`:     `E'a\\b'`,
	} {
		if got := quoteLiteral(in); got != want {
			t.Errorf("quoteLiteral(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestRowValues(t *testing.T) {
	// Two columns: "t" and NULL.
	body := []byte{0, 2, 0, 0, 0, 1, 't', 0xff, 0xff, 0xff, 0xff}
	values, ok := rowValues(body)
	if !ok || len(values) != 2 || values[0] != "t" || values[1] != "" {
		t.Fatalf("rowValues = %q, %v", values, ok)
	}
	if _, ok := rowValues(body[:5]); ok {
		t.Fatal("a truncated row was accepted")
	}
}

// TestRecordedSettingNames: a recorded SET or RESET replaces an earlier one
// of the same setting, whatever the spelling of its name; statements that
// name no session-level setting replace nothing.
func TestRecordedSettingNames(t *testing.T) {
	sess := settingsSession()
	for sql, want := range map[string]string{
		"SET work_mem = '4MB'":               "work_mem",
		"set SESSION Work_Mem TO 4096":       "work_mem",
		"SET app.tenant = 'x';":              "app.tenant",
		`SET "Odd.Name" = 1`:                 "odd.name",
		"RESET work_mem":                     "work_mem",
		`RESET "R6.q"`:                       "r6.q",
		"SET ROLE r":                         "",
		"SET SESSION AUTHORIZATION bob":      "",
		"SET TIME ZONE 'UTC'":                "timezone",
		"SET SCHEMA 'app'":                   "search_path",
		"SET NAMES 'UTF8'":                   "client_encoding",
		"RESET ALL":                          "",
		"SELECT set_config('a', 'b', false)": "a",
		"SET LOCAL work_mem = 1":             "",
		"SET x=5":                            "x",
		"SET x TO DEFAULT":                   "x",
	} {
		change, ok := sess.recordedSetting(sql)
		if !ok {
			change.Name = ""
		}
		if change.Name != want {
			t.Errorf("recordedSetting(%q) = %+v, %v; want name %q", sql, change, ok, want)
		}
	}
}

// TestRepeatedSetIsRecordedOnce: a value set for every request is replayed
// once, not once per request.
func TestRepeatedSetIsRecordedOnce(t *testing.T) {
	sess := settingsSession()
	be := &backend{conn: &pool.Conn{}}
	for i := range 100 {
		sess.applySets(be, []string{"SET work_mem = '" + strconv.Itoa(i+1) + "MB'", "SET app.tenant = 't'"})
	}
	sess.applySets(be, []string{"SET statement_timeout = 5", "RESET app.tenant"})
	want := []string{"SET work_mem = '100MB'", "SET statement_timeout = 5"}
	if !slices.Equal(sess.settings.sets, want) {
		t.Fatalf("recorded %q, want %q", sess.settings.sets, want)
	}
}

func TestSettingReplay(t *testing.T) {
	sess := settingsSession()
	for _, tc := range []struct{ sql, replay, name string }{
		{"SET work_mem = '4MB'", "SET work_mem = '4MB'", ""},
		{"/* c */ RESET work_mem", "/* c */ RESET work_mem", ""},
		{"SELECT set_config('app.tenant', 'x', false)", "SELECT set_config('app.tenant', 'x', false)", ""},
		{"select pg_catalog.set_config('app.tenant', $1, false)", "", "app.tenant"},
		{"SELECT set_config('app.tenant', $1::text, false);", "", "app.tenant"},
		{"SELECT set_config('r.req', gen_random_uuid()::text, false)", "", ""},
		{"SELECT login('x')", "", ""},
		{"SELECT set_config('a', 'b', false), nextval('s')", "", ""},
	} {
		replay, name := settingReplay(sess.srv.opts.Classifier.Classify(tc.sql), tc.sql)
		if replay != tc.replay || name != tc.name {
			t.Errorf("settingReplay(%q) = %q, %q; want %q, %q", tc.sql, replay, name, tc.replay, tc.name)
		}
	}
	r := setConfigReplay("app.tenant", `it's \ here`)
	if change, ok := sess.recordedSetting(r); !ok || change.Name != "app.tenant" {
		t.Errorf("recordedSetting(%q) = %+v, %v", r, change, ok)
	}
}
