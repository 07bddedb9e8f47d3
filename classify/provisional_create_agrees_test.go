package classify

import (
	"reflect"
	"testing"
)

// provisionalCreateCases are CREATE statements ProvisionalCreate must take (true) or leave to the
// parser (false), beside the corpus.
var provisionalCreateCases = map[string]bool{
	"CREATE FUNCTION f(x integer) RETURNS integer LANGUAGE sql AS $$ SELECT x + 1 $$":                 true,
	"  create or replace function s.f() returns void language plpgsql as $b$ BEGIN NULL; END $b$;":    true,
	"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'select 1; select 2'":                            true,
	"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ select ';' $$ ;  ;\n":                         true,
	"CREATE PROCEDURE p() LANGUAGE sql AS $$ SELECT 1 $$":                                             true,
	"CREATE TYPE t AS (a integer, b text)":                                                            true,
	"CREATE TYPE e AS ENUM ('a', 'b;c')":                                                              true,
	"CREATE VIEW v AS SELECT g FROM generate_series(1, 3) AS g -- a comment; with a semicolon":        true,
	"CREATE OR REPLACE VIEW \"V\" AS SELECT 1 /* ; */":                                                true,
	"CREATE FUNCTION \"pg_temp\".f() RETURNS int LANGUAGE sql AS 'select 1'":                          false,
	"CREATE FUNCTION pg_temp.f() RETURNS int LANGUAGE sql AS 'select 1'":                              false,
	"CREATE FUNCTION PG_TEMP_3.f() RETURNS int LANGUAGE sql AS 'select 1'":                            false,
	"CREATE TEMP VIEW v AS SELECT 1":                                                                  false,
	"CREATE TEMPORARY VIEW v AS SELECT 1":                                                             false,
	"CREATE OR REPLACE TEMP VIEW v AS SELECT 1":                                                       false,
	"CREATE OR REPLACE TYPE t AS (a int)":                                                             false,
	"CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END":               false,
	"CREATE VIEW v AS SELECT 1; SELECT 2":                                                             false,
	"CREATE VIEW v AS SELECT 1; DROP TABLE t":                                                         false,
	"CREATE FUNCTION f() RETURNS text LANGUAGE sql AS E'select ''a\\'';' ; DROP TABLE t":              false,
	"/* pgowl:primary */ CREATE VIEW v AS SELECT 1":                                                   false,
	"-- comment\nCREATE VIEW v AS SELECT 1":                                                           false,
	"CREATE/**/VIEW v AS SELECT 1":                                                                    false,
	"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ select 1":                                     false,
	"CREATE VIEW v AS SELECT 'open":                                                                   false,
	"CREATE VIEW v AS SELECT 1 /* open":                                                               false,
	"CREATE TABLE t (a int)":                                                                          false,
	"CREATE INDEX i ON t (a)":                                                                         false,
	"SELECT 1":                                                                                        false,
	"CREATE FUNCTION f( RETURNS":                                                                      true, // unparseable: a write for the primary all the same
	"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $a$ select 1 $a$; $a$ ; $a$":                     false,
	"CREATE VIEW v AS SELECT $1":                                                                      true,
	"CREATE FUNCTION a$b() RETURNS int LANGUAGE sql AS 'select 1'":                                    true,
	"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $_x9$ select 1; $_x9$":                           true,
	"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $9x$ select 1 $9x$":                              true, // $9 is a parameter: unparseable
	"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ a $$ ; CREATE FUNCTION g() RETURNS int AS ''": false,
}

// A statement ProvisionalCreate takes is one the full classification routes alike: every fact
// the proxy reads before it sends a unit (access, transaction control, session effects, the
// statement count, settings, the catalogue change) is the same, for the crafted cases and every
// statement of the classifier's corpus. A text that does not parse after all is a write too.
func TestProvisionalCreateAgrees(t *testing.T) {
	check := func(sql string) bool {
		provisional, ok := ProvisionalCreate(sql)
		if !ok {
			return false
		}
		final := New(Options{}).ClassifyIn(sql, &Context{User: "app", SearchPath: []string{"public"}})
		if final.ParseError != "" {
			if final.Access != Write {
				t.Errorf("%q: does not parse, and is not a write: %+v", sql, final)
			}
			return true
		}
		type routed struct {
			Access          Access
			Tx              TxControl
			Session         SessionEffect
			Pgowl           *PgowlCommand
			Statements      int
			CatalogueChange bool
			Settings        []SettingChange
			SetConfigNames  []string
			SearchPath      *SearchPathChange
			Deallocates     string
			Loads           string
			Discards        bool
			Subject         string
		}
		facts := func(e Effects) routed {
			return routed{e.Access, e.Tx, e.Session, e.Pgowl, e.Statements, e.CatalogueChange, e.Settings, e.SetConfigNames,
				e.SearchPath, e.Deallocates, e.Loads, e.DiscardsSequences, e.Subject}
		}
		if got, want := facts(provisional), facts(final); !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\nprovisional %+v\nfull        %+v", sql, got, want)
		}
		checkProvisionalLabels(t, sql, provisional, final)
		return true
	}
	checkProvisionalTakes(t, provisionalCreateCases, check, 40)
}

// checkProvisionalLabels fails t when the labels provisional effects compute for sql are not
// those its full classification gave.
func checkProvisionalLabels(t *testing.T, sql string, provisional, final Effects) {
	t.Helper()
	provisional.Label()
	if provisional.Fingerprint != final.Fingerprint || provisional.Normalized != final.Normalized {
		t.Errorf("%q: labelled %q %q, by ClassifyIn %q %q", sql, provisional.Fingerprint, provisional.Normalized, final.Fingerprint, final.Normalized)
	}
}

// checkProvisionalTakes runs check (which reports whether the provisional reading took the
// statement, and checks what it took) over cases, each with whether it must be taken, and over
// the corpus; it fails t when fewer than least were taken in all.
func checkProvisionalTakes(t *testing.T, cases map[string]bool, check func(sql string) bool, least int) {
	t.Helper()
	taken := 0
	for sql, want := range cases {
		got := check(sql)
		if got != want {
			t.Errorf("%q: taken %v, want %v", sql, got, want)
		}
		if got {
			taken++
		}
	}
	for _, sql := range walkCorpus(t) {
		if check(sql) {
			taken++
		}
	}
	if taken < least {
		t.Fatalf("only %d statements taken provisionally", taken)
	}
	t.Logf("%d statements taken provisionally", taken)
}

// FuzzProvisionalCreate checks the agreement on arbitrary texts that start like a CREATE.
func FuzzProvisionalCreate(f *testing.F) {
	for sql := range provisionalCreateCases {
		f.Add(sql)
	}
	c := New(Options{})
	f.Fuzz(func(t *testing.T, sql string) {
		provisional, ok := ProvisionalCreate(sql)
		if !ok {
			return
		}
		final := c.ClassifyIn(sql, &Context{User: "app"})
		if final.Access != Write {
			t.Fatalf("%q: taken as a write, classified %+v", sql, final)
		}
		if final.ParseError == "" && (final.Statements != 1 || final.Tx != provisional.Tx || final.Session != provisional.Session ||
			!final.CatalogueChange || final.Pgowl != nil) {
			t.Fatalf("%q: taken as %+v, classified %+v", sql, provisional, final)
		}
	})
}
