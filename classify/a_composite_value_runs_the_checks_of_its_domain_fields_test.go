package classify_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgowl/pgowl/classify"
)

// TestACompositeValueRunsTheChecksOfItsDomainFields: a composite type whose field is of a domain
// runs the domain's CHECK whenever a value of the composite is built: from a literal ('(1)'::t,
// record_in converts each field), from ROW(...)::t, from JSON (json[b]_populate_record), and a
// column definition list (jsonb_to_record(...) AS x(a d)) builds each column with the domain's
// input; a literal is read as the statement is parsed, so EXPLAIN without ANALYZE runs it too. A
// CHECK that calls a function which writes makes each of these statements write. pgowl
// looks for domain checks only where the target type is itself a domain, so it calls them reads
// and sends them to a standby, which refuses them; the primary runs them.
func TestACompositeValueRunsTheChecksOfItsDomainFields(t *testing.T) {
	ctx, primary, standby := startPrimaryAndStandby(t)
	const setup = `
CREATE TABLE cdf_audit (at timestamptz DEFAULT now());
CREATE FUNCTION cdf_logged(v int) RETURNS bool LANGUAGE sql AS $$ INSERT INTO cdf_audit DEFAULT VALUES; SELECT v > 0 $$;
CREATE DOMAIN cdf_positive AS int CHECK (cdf_logged(VALUE));
CREATE TYPE cdf_pair AS (a cdf_positive, b text);
CREATE TABLE cdf_row (a cdf_positive, b text);`
	cat := loadCatalogueAfter(t, ctx, primary, standby, setup)

	classifier := classify.New(classify.Options{CacheSize: -1})
	session := &classify.Context{Database: "postgres", User: "postgres"}
	// Sanity: the domain itself is seen.
	if e := classifier.ClassifyWith("SELECT 1::cdf_positive", session, cat); e.Access != classify.Write {
		t.Fatalf("SELECT 1::cdf_positive is %v %v; the domain check is not in the catalogue", e.Access, e.Reason)
	}
	var refused []string
	for _, sql := range []string{
		`SELECT '(1,x)'::cdf_pair`,
		`SELECT ROW(1, 'x')::cdf_pair`,
		`SELECT '(1,x)'::cdf_row`,
		`SELECT jsonb_populate_record(NULL::cdf_pair, '{"a": 1}')`,
		`SELECT * FROM json_populate_record(NULL::cdf_row, '{"a": 1}')`,
		`SELECT * FROM jsonb_to_record('{"a": 1}') AS x(a cdf_positive)`,
		`SELECT * FROM unnest('{"(1,x)"}'::cdf_pair[])`,
		// The literal is read while the statement is parsed: planning alone runs the check.
		`EXPLAIN SELECT '(1,x)'::cdf_pair`,
	} {
		effects := classifier.ClassifyWith(sql, session, cat)
		if effects.Access != classify.Read {
			continue
		}
		standbyErr := runOnNode(ctx, standby, sql)
		primaryErr := runOnNode(ctx, primary, sql)
		if standbyErr != nil {
			refused = append(refused, fmt.Sprintf("%s\n  pgowl: read (%v), sent to a standby\n  standby: %v\n  primary: %v (the domain's CHECK writes cdf_audit)",
				sql, effects.Reason, standbyErr, cdfOK(primaryErr)))
		}
	}
	// A known gap (README, Limits): the catalogue pgowl loads holds no composite type's fields,
	// so their domains' checks are not followed. The test logs it while it is there, and fails
	// once it is gone, so that the documentation loses it.
	if len(refused) > 0 {
		t.Logf("known gap, still present: a composite value's domain fields' CHECKs are not analysed:\n%s", strings.Join(refused, "\n"))
	} else {
		t.Error("known gap no longer observed: composite values' domain field checks are analysed; make this a plain regression test and remove the gap from README's Limits")
	}
}

func cdfOK(err error) string {
	if err == nil {
		return "runs it"
	}
	return err.Error()
}
