package integration

import (
	"testing"
)

// A write through an automatically updatable view runs more of the view than the
// table under it: an UPDATE or DELETE reads the rows through the view's WHERE, an INSERT or
// UPDATE WITH CHECK OPTION evaluates the WHERE on the new row, RETURNING evaluates the view's
// select list, and a view over pg_settings writes through pg_settings' rule (set_config). Each
// case is checked first on a direct connection (the oracle: the state stays with the writer);
// through pgowl the other client sharing the backend must not get it.

const viewQueryWriteSetup = `
CREATE OR REPLACE FUNCTION public.vq_true(int) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-view-where', false);
	RETURN true;
END $f$;
CREATE OR REPLACE FUNCTION public.vq_val(int) RETURNS int LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-view-select-list', false);
	RETURN $1;
END $f$;
DROP VIEW IF EXISTS public.vq_where, public.vq_check, public.vq_list, public.vq_settings CASCADE;
DROP TABLE IF EXISTS public.vq_base CASCADE;
CREATE TABLE public.vq_base (id int);
INSERT INTO public.vq_base VALUES (1);
CREATE VIEW public.vq_where AS SELECT id FROM public.vq_base WHERE public.vq_true(id);
CREATE VIEW public.vq_check AS SELECT id FROM public.vq_base WHERE public.vq_true(id) WITH CHECK OPTION;
CREATE VIEW public.vq_list AS SELECT id, public.vq_val(id) AS f FROM public.vq_base;
CREATE VIEW public.vq_settings AS SELECT name, setting FROM pg_catalog.pg_settings;
ALTER TABLE public.vq_base OWNER TO app;
ALTER VIEW public.vq_where OWNER TO app; ALTER VIEW public.vq_check OWNER TO app;
ALTER VIEW public.vq_list OWNER TO app; ALTER VIEW public.vq_settings OWNER TO app;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO app;
`

func TestAWriteThroughAViewRunsTheViewQueryExpressions(t *testing.T) {
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, viewQueryWriteSetup); err != nil {
		t.Fatalf("set up: %v", err)
	}
	for _, tc := range []struct {
		name, sql, probe, want string
	}{
		{"UpdateRunsTheViewWhere", "UPDATE public.vq_where SET id = id",
			"SELECT coalesce(current_setting('review_state.tenant', true), '')", "from-view-where"},
		{"DeleteRunsTheViewWhere", "DELETE FROM public.vq_where WHERE id = 5",
			"SELECT coalesce(current_setting('review_state.tenant', true), '')", "from-view-where"},
		{"CheckOptionRunsTheViewWhereOnInsert", "INSERT INTO public.vq_check VALUES (2)",
			"SELECT coalesce(current_setting('review_state.tenant', true), '')", "from-view-where"},
		{"ReturningRunsTheViewSelectList", "INSERT INTO public.vq_list (id) VALUES (3) RETURNING f",
			"SELECT coalesce(current_setting('review_state.tenant', true), '')", "from-view-select-list"},
		// Not views written, the same root (a write's relations are not analysed): the rule of
		// pg_settings itself, and a view a write reads.
		{"PgSettingsItself", "UPDATE pg_catalog.pg_settings SET setting = 'pg_catalog' WHERE name = 'search_path'",
			"SELECT current_setting('search_path')", "pg_catalog"},
		{"AWriteThatReadsAView", "INSERT INTO public.vq_base SELECT id FROM public.vq_list",
			"SELECT coalesce(current_setting('review_state.tenant', true), '')", "from-view-select-list"},
		{"AViewOverPgSettings", "UPDATE public.vq_settings SET setting = 'pg_catalog' WHERE name = 'search_path'",
			"SELECT current_setting('search_path')", "pg_catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkWriteKeepsItsStateWithItsClient(t, c, "INSERT INTO public.vq_base VALUES (5), (5)", tc.sql, tc.probe, tc.want)
		})
	}
}
