package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// Objects taken from their CREATE statement without a read hold OIDs of pgowl's until a read
// reads them. A migration takes hundreds: they are read, by name, once no object has been taken
// for Options.ConfirmTakenAfter, in one read of the Manager's own. Until then every read by name
// would read them all with it, and more than a read by name carries made that the next read, the
// one a statement waits for, a whole read (13 ms and more on a small database, where a read of a
// few names takes one or two).
func TestObjectsTakenFromStatementsAreReadOnceChangesQuietDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	log := &readLog{}
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second,
		ConfirmTakenAfter: 100 * time.Millisecond, Logger: zerolog.New(log).Level(zerolog.DebugLevel)})
	classifier := classify.New(classify.Options{Catalogues: m})
	session := &classify.Context{Database: "app", User: "postgres"}
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	const made = 100 // more than the 64 names a read by name carried before it became a whole read
	for i := 0; i < made; i++ {
		sql := fmt.Sprintf("CREATE FUNCTION step_%d(x integer) RETURNS integer LANGUAGE sql AS $$ SELECT x + %d $$", i, i)
		effects := classifier.ClassifyIn(sql, session)
		exec(db, sql)
		if effects.CatalogueChanges == nil || !m.ChangedAndCreated("app", effects.CatalogueChanges, effects.CatalogueChanges.Created, session) {
			t.Fatalf("%s: not taken from the statement", sql)
		}
	}
	if f := findFunction(m.Loaded("app"), "public", "step_0", "integer"); f == nil || f.OID < 0xFF000000 {
		t.Fatalf("step_0 right after it was taken: %+v, want an OID of pgowl's", f)
	}

	// Read once the changes quiet down: every function under PostgreSQL's OID.
	oids := map[string]uint32{}
	rows, err := db.Query(ctx, "SELECT proname::text, oid::int8 FROM pg_proc WHERE proname LIKE 'step\\_%'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var oid int64
		if err := rows.Scan(&name, &oid); err != nil {
			t.Fatal(err)
		}
		oids[name] = uint32(oid)
	}
	if rows.Err() != nil || len(oids) != made {
		t.Fatalf("pg_proc holds %d step functions (%v)", len(oids), rows.Err())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		wrong := ""
		cat := m.Loaded("app")
		for name, oid := range oids {
			if f := findFunction(cat, "public", name, "integer"); f == nil || f.OID != oid {
				wrong = fmt.Sprintf("%s: %+v, want OID %d", name, f, oid)
				break
			}
		}
		if wrong == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the last function was taken, the catalogue has not read them: %s", wrong)
		}
		time.Sleep(20 * time.Millisecond)
	}
	reads := log.reads(t)
	if len(reads) == 0 {
		t.Fatal("no read logged")
	}
	last := reads[len(reads)-1]
	if last.Whole || len(last.Functions) < made {
		t.Errorf("the read of the taken functions: whole %v, %d function names; want a read by name of all %d", last.Whole, len(last.Functions), made)
	}

	// What is taken next goes on from there: taken again, then read again once quiet.
	sql := "CREATE FUNCTION after_quiet() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$"
	effects := classifier.ClassifyIn(sql, session)
	exec(db, sql)
	if !m.ChangedAndCreated("app", effects.CatalogueChanges, effects.CatalogueChanges.Created, session) {
		t.Fatalf("%s: not taken from the statement", sql)
	}
}

// A read by name reads the list of schemas too: where the next unqualified CREATE goes depends on
// which schemas of the search_path exist, and a schema made since the last whole read, with
// nothing in it yet, is in no name a read by name reads.
func TestReadByNameLearnsSchemasMadeSince(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second, ConfirmTakenAfter: time.Hour})
	classifier := classify.New(classify.Options{Catalogues: m})
	session := &classify.Context{Database: "app", User: "postgres", SearchPath: []string{"fresh", "public"}}
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	exec(db, "CREATE SCHEMA fresh") // outside pgowl: no statement tells the catalogue of it
	exec(db, "CREATE FUNCTION public.unrelated() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$")
	m.Changed("app", &classify.CatalogueChanges{Functions: []string{"unrelated"}}, true)
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue after the read of unrelated")
	}
	sql := "CREATE FUNCTION made_in_fresh() RETURNS integer LANGUAGE sql AS $$ SELECT 2 $$"
	effects := classifier.ClassifyIn(sql, session)
	exec(db, sql)
	if effects.CatalogueChanges == nil || !m.ChangedAndCreated("app", effects.CatalogueChanges, effects.CatalogueChanges.Created, session) {
		t.Fatalf("%s with search_path fresh, public: not taken from the statement (the catalogue does not know fresh exists)", sql)
	}
	if f := findFunction(m.Loaded("app"), "fresh", "made_in_fresh", ""); f == nil {
		t.Errorf("the catalogue holds no fresh.made_in_fresh()")
	}
	if f := findFunction(m.Loaded("app"), "public", "made_in_fresh", ""); f != nil {
		t.Errorf("the catalogue holds public.made_in_fresh(), where PostgreSQL made it in fresh")
	}
}

// A schema made outside pgowl since the last read, last on the session's search_path, is where
// an unqualified CREATE that succeeded made its object: PostgreSQL had no other schema to make it
// in. So the object is taken from its statement with no read, as a migration tool that connects
// with search_path set to the schema it has just made sends it. A schema named in the statement
// exists for the same reason.
func TestCreateInASchemaMadeSinceIsTakenWhenNothingElseCouldHoldIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	log := &readLog{}
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second,
		ConfirmTakenAfter: time.Hour, Logger: zerolog.New(log).Level(zerolog.DebugLevel)})
	classifier := classify.New(classify.Options{Catalogues: m})
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	exec(db, "CREATE SCHEMA made_since; CREATE SCHEMA named_since") // outside pgowl
	readsBefore := len(log.reads(t))
	for _, c := range []struct{ path, sql, schema string }{
		{"made_since", "CREATE FUNCTION only_here() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$", "made_since"},
		{`"$user", made_since`, "CREATE FUNCTION after_user() RETURNS integer LANGUAGE sql AS $$ SELECT 2 $$", "made_since"},
		{"public", "CREATE FUNCTION named_since.qualified() RETURNS integer LANGUAGE sql AS $$ SELECT 3 $$", "named_since"},
	} {
		session := &classify.Context{Database: "app", User: "postgres", SearchPath: classify.SplitSearchPath(c.path)}
		if _, err := db.Exec(ctx, "SET search_path = "+c.path); err != nil {
			t.Fatal(err)
		}
		effects := classifier.ClassifyIn(c.sql, session)
		exec(db, c.sql)
		if effects.CatalogueChanges == nil || !m.ChangedAndCreated("app", effects.CatalogueChanges, effects.CatalogueChanges.Created, session) {
			t.Fatalf("search_path %s, %s: not taken from the statement", c.path, c.sql)
		}
		var where string
		if err := db.QueryRow(ctx, "SELECT n.nspname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.proname = $1",
			created(effects)).Scan(&where); err != nil {
			t.Fatal(err)
		}
		if where != c.schema {
			t.Fatalf("PostgreSQL made %s in %s; the case expects %s", created(effects), where, c.schema)
		}
		if f := findFunction(m.Loaded("app"), where, created(effects), ""); f == nil {
			t.Errorf("search_path %s, %s: the catalogue holds no %s.%s", c.path, c.sql, where, created(effects))
		}
	}
	if reads := log.reads(t)[readsBefore:]; len(reads) > 0 {
		t.Errorf("the catalogue read %d time(s) (the first %+v); want every function taken from its statement", len(reads), reads[0])
	}
	if _, err := db.Exec(ctx, "RESET search_path"); err != nil {
		t.Fatal(err)
	}
}

// created is the name of the function effects say their statement made.
func created(effects classify.Effects) string {
	if f, ok := effects.CatalogueChanges.Created.(*classify.CreatedFunction); ok {
		return f.Name
	}
	return ""
}

// readLog collects the Manager's log lines.
type readLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *readLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// catalogueRead is a "function catalogue read" line of a read of the Manager's own.
type catalogueRead struct {
	Message   string   `json:"message"`
	Whole     bool     `json:"whole"`
	Session   bool     `json:"session"`
	Functions []string `json:"functions"`
}

// reads returns the reads the Manager logged, oldest first, leaving out the changes sessions
// patched in.
func (l *readLog) reads(t *testing.T) []catalogueRead {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []catalogueRead
	for _, line := range bytes.Split(l.buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r catalogueRead
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		if r.Message == "function catalogue read" && !r.Session {
			out = append(out, r)
		}
	}
	return out
}
