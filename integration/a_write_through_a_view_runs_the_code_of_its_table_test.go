package integration

import (
	"testing"
)

// A write of an automatically updatable view writes the table in its FROM, and that table's
// triggers, defaults and CHECKs run as for a write of the table itself, down views of views. On a
// direct connection (the oracle, on the primary) each case leaves the tenant set with the session
// that wrote; through pgowl the other client sharing the backend must not get it, whether the
// view was read with the catalogue or taken from its CREATE VIEW statement through pgowl.

const viewWriteSetup = `
CREATE OR REPLACE FUNCTION public.vw_tenant_trg() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-' || TG_TABLE_NAME, false);
	RETURN NEW;
END $f$;
CREATE OR REPLACE FUNCTION public.vw_tenant_default() RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-default', false);
	RETURN 'd';
END $f$;
DROP VIEW IF EXISTS public.vw_of_view, public.vw_view, public.vw_default_view, public.vw_made_through_pgowl CASCADE;
DROP TABLE IF EXISTS public.vw_base, public.vw_default_base CASCADE;
CREATE TABLE public.vw_base (id int);
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON public.vw_base FOR EACH ROW EXECUTE FUNCTION public.vw_tenant_trg();
CREATE VIEW public.vw_view AS SELECT id FROM public.vw_base WHERE id > 0;
CREATE VIEW public.vw_of_view AS SELECT id FROM public.vw_view;
CREATE TABLE public.vw_default_base (id int, tag text DEFAULT public.vw_tenant_default());
CREATE VIEW public.vw_default_view AS SELECT id FROM public.vw_default_base;
ALTER TABLE public.vw_base OWNER TO app; ALTER VIEW public.vw_view OWNER TO app; ALTER VIEW public.vw_of_view OWNER TO app;
ALTER TABLE public.vw_default_base OWNER TO app; ALTER VIEW public.vw_default_view OWNER TO app;
GRANT CREATE ON SCHEMA public TO app;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO app;
`

func TestAWriteThroughAViewRunsTheCodeOfItsTable(t *testing.T) {
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, viewWriteSetup); err != nil {
		t.Fatalf("set up: %v", err)
	}
	for _, tc := range []struct {
		name, sql, tenant string
	}{
		{"InsertThroughAView", "INSERT INTO public.vw_view VALUES (1)", "from-vw_base"},
		{"UpdateThroughAViewOfAView", "UPDATE public.vw_of_view SET id = id + 1", "from-vw_base"},
		{"InsertThroughAViewUnqualified", "INSERT INTO vw_of_view VALUES (3)", "from-vw_base"},
		{"ADefaultOfTheTableUnderAView", "INSERT INTO public.vw_default_view (id) VALUES (1)", "from-default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkWriteKeepsItsStateWithItsClient(t, c, "INSERT INTO public.vw_base VALUES (5)", tc.sql, tenantProbe, tc.tenant)
		})
	}
	t.Run("AViewMadeThroughPgowl", func(t *testing.T) {
		ctx := timeoutCtx(t, statementTimeout)
		o := rvStartOneBackend(t, nil)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		// Taken from its statement: the write that follows is classified without a read of it.
		r3pExecAll(t, ctx, a, "CREATE VIEW vw_made_through_pgowl AS SELECT id FROM vw_base",
			"INSERT INTO vw_made_through_pgowl VALUES (7)")
		checkNoLeakedState(t, b, "after A wrote through the view it made")
	})
}
