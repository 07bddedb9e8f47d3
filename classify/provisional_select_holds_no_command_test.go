package classify

import "testing"

// provisionalSelectCases are statements ProvisionalSelect must take (true) or leave to the parser
// (false), beside the corpus.
var provisionalSelectCases = map[string]bool{
	"SELECT f_12(12)":                               true,
	"  select (ROW(1, 'a')::t_3).a":                 true,
	"SELECT sum(y) FROM v_3":                        true,
	"SELECT ';' AS semicolon, $$;$$ AS dollar; ;\n": true,
	"SELECT nextval('s') FOR UPDATE":                true,
	"SELECT pg_advisory_lock(1)":                    true,
	"SELECT set_config('search_path', 'a', false)":  true,
	"SELECT 1 -- a comment; with a semicolon":       true,
	"SELECT $1":                        true,
	"SELECT 1 INTO t":                  false,
	"select * into temp x from y":      false,
	"SELECT a FROM t WHERE b = 'INTO'": false,
	"SELECT point_into FROM t":         false,
	"/* pgowl:primary */ SELECT 1":     false,
	"-- comment\nSELECT 1":             false,
	"SELECT 1; SELECT 2":               false,
	"SELECT 1; BEGIN":                  false,
	"SELECT E'\\'; DROP TABLE t; --'":  false,
	"SELECT 'open":                     false,
	"SELECT 1 /* open":                 false,
	"SELECT $a$ open":                  false,
	"SELECT(1)":                        false,
	"SELECTX 1":                        false,
	"WITH w AS (DELETE FROM t RETURNING *) SELECT * FROM w": false,
	"SHOW pgowl.route":          false,
	"SET pgowl.route = primary": false,
	"BEGIN":                     false,
	"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'select 1'": false,
	"PREPARE p AS SELECT 1":                                   false,
	"SELECT 1 UNION SELECT 2":                                 true,
	"SELECT * FROM t, LATERAL (SELECT 1) s":                   true,
	"SELECT x FROM t WHERE y IN (SELECT z FROM u)":            true,
	"SELECT 1 ; ; ":                                           true,
	"SELECT f() ; DEALLOCATE ALL":                             false,
	"SELECT pg_catalog.set_config('pgowl.route', 'x', false)": true,
	"SELECT 'a' \\g":                                          false,
	"SELECT \"INTO\" FROM t":                                  false,
	"SELECT 1 FROM t WHERE a = $1 AND b = $2":                 true,
	"SELECT * FROM t /* ; DROP TABLE t */":                    true,
	"SELECT * FROM t; /* trailing */":                         false,
}

// A statement ProvisionalSelect takes is one the proxy may send to the primary before it is
// parsed: whatever it does, the full classification finds one statement with no transaction
// control, no pgowl command (which the proxy would answer itself) and no DEALLOCATE (which it may
// answer itself), for the crafted cases and every statement of the classifier's corpus; its labels
// are ClassifyIn's. The provisional effects are a write: the plan sends them to the primary.
func TestProvisionalSelectHoldsNoCommandTheProxyActsOnBeforeTheSend(t *testing.T) {
	c := New(Options{Catalogues: staticSource{testCatalogue()}})
	check := func(sql string) bool {
		provisional, ok := ProvisionalSelect(sql)
		if !ok {
			return false
		}
		if provisional.Access != Write || provisional.Statements != 1 || provisional.Tx != TxNone || provisional.Pgowl != nil {
			t.Errorf("%q: provisional effects %+v", sql, provisional)
		}
		for _, ctx := range []*Context{{User: "app", SearchPath: []string{"public"}}, {Database: "test", User: "app", SearchPath: []string{"public"}}} {
			final := c.ClassifyIn(sql, ctx)
			if final.ParseError != "" {
				continue // the node refuses it as the parser did
			}
			if final.Statements != 1 || final.Tx != TxNone || final.Pgowl != nil || final.Deallocates != "" {
				t.Errorf("%q (database %q): classified %d statement(s), tx %v, pgowl %+v, deallocates %q",
					sql, ctx.Database, final.Statements, final.Tx, final.Pgowl, final.Deallocates)
			}
			checkProvisionalLabels(t, sql, provisional, final)
		}
		return true
	}
	checkProvisionalTakes(t, provisionalSelectCases, check, 100)
}

// FuzzProvisionalSelect checks the same on arbitrary texts that start like a SELECT.
func FuzzProvisionalSelect(f *testing.F) {
	for sql := range provisionalSelectCases {
		f.Add(sql)
	}
	c := New(Options{})
	f.Fuzz(func(t *testing.T, sql string) {
		if _, ok := ProvisionalSelect(sql); !ok {
			return
		}
		final := c.ClassifyIn(sql, &Context{User: "app"})
		if final.ParseError == "" && (final.Statements != 1 || final.Tx != TxNone || final.Pgowl != nil || final.Deallocates != "") {
			t.Fatalf("%q: classified %+v", sql, final)
		}
	})
}
