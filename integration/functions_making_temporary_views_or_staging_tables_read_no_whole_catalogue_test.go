package integration

import (
	"fmt"
	"testing"
	"time"
)

// TestFunctionsMakingTemporaryViewsOrStagingTablesReadNoWholeCatalogue: a function called often
// that makes a temporary view by EXECUTE format(...), or makes and drops a staging table, changes
// nothing the catalogue holds. Review found both reading the catalogue whole at every call or
// drop: a temporary view was taken as a change of the catalogue (a view's persistence was not
// looked at), and the change poll counted tables, whose drops in a function no session tells.
func TestFunctionsMakingTemporaryViewsOrStagingTablesReadNoWholeCatalogue(t *testing.T) {
	o := formattedDDLOwl(t, time.Second, false)
	conn := oaConnect(t, o, oaModes[0].mode)
	oaMust(t, conn, "CREATE OR REPLACE FUNCTION oa_app.tv_my_rows(tag text) RETURNS void LANGUAGE plpgsql VOLATILE AS $i$BEGIN "+
		"EXECUTE format('CREATE OR REPLACE TEMP VIEW %I AS SELECT * FROM oa_app.oa_log WHERE tag = %L', 'my_rows', tag); END$i$")
	oaMust(t, conn, "CREATE OR REPLACE FUNCTION oa_app.tv_stage_make(n int) RETURNS void LANGUAGE plpgsql VOLATILE AS $i$BEGIN "+
		"EXECUTE format('CREATE TABLE IF NOT EXISTS oa_app.%I (x int)', 'tv_stage_' || n); END$i$")
	oaMust(t, conn, "CREATE OR REPLACE FUNCTION oa_app.tv_stage_drop(n int) RETURNS void LANGUAGE plpgsql VOLATILE AS $i$BEGIN "+
		"EXECUTE format('DROP TABLE IF EXISTS oa_app.%I', 'tv_stage_' || n); END$i$")
	oaMust(t, conn, "SELECT oa_app.tv_stage_make(0)")
	time.Sleep(3 * time.Second) // the polls take the functions in
	before := wholeCatalogueReads(t, o)
	const calls = 10
	for i := range calls {
		oaMust(t, conn, fmt.Sprintf("SELECT oa_app.tv_my_rows('t%d')", i))
		oaMust(t, conn, "SELECT count(*) FROM my_rows")
	}
	const rounds = 3
	for i := 1; i <= rounds; i++ {
		oaMust(t, conn, fmt.Sprintf("SELECT oa_app.tv_stage_make(%d)", i))
		time.Sleep(1200 * time.Millisecond) // a poll counts the new table
		oaMust(t, conn, fmt.Sprintf("SELECT oa_app.tv_stage_drop(%d)", i-1))
		time.Sleep(1200 * time.Millisecond) // and the next one finds it gone
	}
	got := wholeCatalogueReads(t, o) - before
	t.Logf("whole catalogue reads during %d calls that make a temporary view and %d staging-table rotations: %d", calls, rounds, got)
	if got > 1 { // the periodic one is ten minutes away; one allows for a read already due
		t.Errorf("%d whole catalogue reads, want none", got)
	}
}

// wholeCatalogueReads counts the whole catalogue reads o logged, those that found it unchanged
// too.
func wholeCatalogueReads(t *testing.T, o *owl) int {
	t.Helper()
	n := 0
	for _, e := range o.logs.Entries(t) {
		if (e["message"] == "function catalogue read" || e["message"] == "function catalogue read: unchanged") && e["whole"] == true {
			n++
		}
	}
	return n
}
