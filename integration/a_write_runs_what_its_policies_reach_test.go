package integration

import "testing"

// A write runs what its row security policies reach, not only the functions they name: an INSERT
// policy's WITH CHECK that reads a view (whose query calls a function), or that compares through
// a user-defined operator (whose function is the call). And UPDATE of a view writes the view even
// when a CTE of the statement has its name (a target is never a CTE). On a direct connection
// (checked first, on the primary) each leaves the tenant set with the session that wrote; through
// pgowl the other client sharing the backend must not get it.

const h2PolicyReachSetup = `
CREATE OR REPLACE FUNCTION public.h2_tenant(what text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-' || what, false);
	RETURN true;
END $f$;
CREATE OR REPLACE FUNCTION public.h2_tenant_op(a int, b int) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-operator', false);
	RETURN true;
END $f$;
DROP TABLE IF EXISTS public.h2_plain, public.h2_rls_view, public.h2_rls_op CASCADE;
DROP OPERATOR IF EXISTS public.#~# (int, int);
CREATE OPERATOR public.#~# (LEFTARG = int, RIGHTARG = int, FUNCTION = public.h2_tenant_op);
CREATE TABLE public.h2_plain (id int);
CREATE VIEW public.h2_v AS SELECT id FROM public.h2_plain WHERE public.h2_tenant('view');
CREATE TABLE public.h2_rls_view (id int);
ALTER TABLE public.h2_rls_view ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY ins ON public.h2_rls_view FOR INSERT WITH CHECK (EXISTS (SELECT FROM public.h2_v));
CREATE TABLE public.h2_rls_op (id int);
ALTER TABLE public.h2_rls_op ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY ins ON public.h2_rls_op FOR INSERT WITH CHECK (id #~# 1);
ALTER TABLE public.h2_plain OWNER TO app; ALTER VIEW public.h2_v OWNER TO app;
ALTER TABLE public.h2_rls_view OWNER TO app; ALTER TABLE public.h2_rls_op OWNER TO app;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO app;
`

const h2PolicyReachRows = `DELETE FROM public.h2_plain; INSERT INTO public.h2_plain VALUES (1);`

func TestAWriteRunsWhatItsPoliciesReach(t *testing.T) {
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, h2PolicyReachSetup); err != nil {
		t.Fatalf("set up: %v", err)
	}
	for _, tc := range []struct {
		name, sql, tenant string
	}{
		{"WithCheckReadingAView", "INSERT INTO public.h2_rls_view VALUES (1)", "from-view"},
		{"WithCheckThroughAnOperator", "INSERT INTO public.h2_rls_op VALUES (1)", "from-operator"},
		{"UpdateOfAViewNamedAsACTE", "WITH h2_v AS (SELECT 1) UPDATE h2_v SET id = id", "from-view"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkWriteKeepsItsStateWithItsClient(t, c, h2PolicyReachRows, tc.sql, tenantProbe, tc.tenant)
		})
	}
}
