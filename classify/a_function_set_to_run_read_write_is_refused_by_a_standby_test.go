package classify_test

import (
	"testing"

	"github.com/pgowl/pgowl/classify"
)

// TestAFunctionSetToRunReadWriteIsRefusedByAStandby: a function's own SET clause
// (CREATE FUNCTION ... SET transaction_read_only = off, proconfig) is applied each time it is
// called. On the primary that changes nothing; on a hot standby, whose every transaction is read
// only, it is refused: "transaction read-write mode must be set before any query" (25001). The
// body itself only reads, so pgowl, which reads nothing of proconfig but search_path, calls the
// function a read and sends every call of it to a standby, where it always fails.
func TestAFunctionSetToRunReadWriteIsRefusedByAStandby(t *testing.T) {
	ctx, primary, standby := startPrimaryAndStandby(t)
	const setup = `
CREATE TABLE frw_items (id int);
CREATE FUNCTION frw_count() RETURNS bigint LANGUAGE sql
  SET transaction_read_only = off AS $$ SELECT count(*) FROM frw_items $$;
CREATE FUNCTION frw_total() RETURNS bigint LANGUAGE plpgsql STABLE
  SET transaction_read_only TO false AS $$ BEGIN RETURN (SELECT count(*) FROM frw_items); END $$;
CREATE FUNCTION frw_report() RETURNS bigint LANGUAGE sql AS $$ SELECT frw_count() $$;`
	cat := loadCatalogueAfter(t, ctx, primary, standby, setup)

	classifier := classify.New(classify.Options{CacheSize: -1})
	session := &classify.Context{Database: "postgres", User: "postgres"}
	for _, sql := range []string{
		"SELECT frw_count()",
		"SELECT frw_total()",
		"SELECT frw_report()",
	} {
		effects := classifier.ClassifyWith(sql, session, cat)
		if effects.Access != classify.Read {
			continue
		}
		standbyErr := runOnNode(ctx, standby, sql)
		primaryErr := runOnNode(ctx, primary, sql)
		if standbyErr != nil {
			primarySays := "runs it"
			if primaryErr != nil {
				primarySays = primaryErr.Error()
			}
			t.Errorf("%s\n  pgowl: read (%v), sent to a standby\n  standby: %v\n  primary: %s",
				sql, effects.Reason, standbyErr, primarySays)
		}
	}
}
