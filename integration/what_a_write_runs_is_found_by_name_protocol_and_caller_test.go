package integration

import (
	"testing"
)

// The table whose triggers run is found as PostgreSQL finds it: along the session's
// search_path, under a quoted mixed-case name, from inside a function's body, and whatever the
// protocol the write comes in.

const h1NameSetup = `
CREATE SCHEMA IF NOT EXISTS h1n_s AUTHORIZATION app;
CREATE SCHEMA IF NOT EXISTS "H1n Sch" AUTHORIZATION app;
CREATE OR REPLACE FUNCTION "H1n Sch"."H1n_Tenant"() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-' || TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME, false);
	RETURN NULL;
END $f$;
DROP TABLE IF EXISTS h1n_s.h1n_sp, public.h1n_sp, "H1n Sch"."H1n_Mixed", public.h1n_body CASCADE;
CREATE TABLE h1n_s.h1n_sp (id int);
CREATE TRIGGER t AFTER INSERT ON h1n_s.h1n_sp FOR EACH ROW EXECUTE FUNCTION "H1n Sch"."H1n_Tenant"();
CREATE TABLE public.h1n_sp (id int);
CREATE TABLE "H1n Sch"."H1n_Mixed" (id int);
CREATE TRIGGER t AFTER INSERT ON "H1n Sch"."H1n_Mixed" FOR EACH ROW EXECUTE FUNCTION "H1n Sch"."H1n_Tenant"();
CREATE TABLE public.h1n_body (id int);
CREATE TRIGGER t AFTER INSERT ON public.h1n_body FOR EACH ROW EXECUTE FUNCTION "H1n Sch"."H1n_Tenant"();
CREATE OR REPLACE FUNCTION public.h1n_ins_pl() RETURNS void LANGUAGE plpgsql AS $f$
BEGIN INSERT INTO public.h1n_body VALUES (1); END $f$;
CREATE OR REPLACE FUNCTION public.h1n_ins_sql() RETURNS void LANGUAGE sql AS $f$ INSERT INTO public.h1n_body VALUES (2) $f$;
ALTER TABLE h1n_s.h1n_sp OWNER TO app; ALTER TABLE public.h1n_sp OWNER TO app;
ALTER TABLE "H1n Sch"."H1n_Mixed" OWNER TO app; ALTER TABLE public.h1n_body OWNER TO app;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public, "H1n Sch" TO app;
`

func TestWhatAWriteRunsIsFoundByNameProtocolAndCaller(t *testing.T) {
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, h1NameSetup); err != nil {
		t.Fatalf("set up: %v", err)
	}
	catchUp(t, c)
	for _, tc := range []struct {
		name   string
		stmts  []string
		tenant string
		// extended runs the last statement with the extended protocol (Parse/Bind/Execute).
		extended bool
	}{
		{"SearchPathFindsTheTriggeredTable", []string{"SET search_path = h1n_s, public", "INSERT INTO h1n_sp VALUES (1)", "RESET search_path"}, "from-h1n_s.h1n_sp", false},
		{"QuotedMixedCaseNames", []string{`INSERT INTO "H1n Sch"."H1n_Mixed" VALUES (1)`}, "from-H1n Sch.H1n_Mixed", false},
		{"PlpgsqlBodyWrites", []string{"SELECT public.h1n_ins_pl()"}, "from-public.h1n_body", false},
		{"SQLBodyWrites", []string{"SELECT public.h1n_ins_sql()"}, "from-public.h1n_body", false},
		{"ExtendedProtocol", []string{"INSERT INTO public.h1n_body VALUES (3)"}, "from-public.h1n_body", true},
		{"MergeWrites", []string{"MERGE INTO public.h1n_body d USING (SELECT 9 AS id) s ON false WHEN NOT MATCHED THEN INSERT VALUES (s.id)"}, "from-public.h1n_body", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oracle := ""
			for _, s := range tc.stmts {
				oracle += s + "; "
			}
			writeRunsOracle(t, oracle+"SELECT 1", tc.tenant)
			o := rvStartOneBackend(t, nil)
			ctx := timeoutCtx(t, statementTimeout)
			a := o.connect(t, nil).PgConn()
			b := o.connect(t, nil).PgConn()
			last := len(tc.stmts) - 1
			if tc.extended {
				r3pExecAll(t, ctx, a, tc.stmts[:last]...)
				if res := a.ExecParams(ctx, tc.stmts[last], nil, nil, nil, nil).Read(); res.Err != nil {
					t.Fatalf("A: %s: %v", tc.stmts[last], res.Err)
				}
			} else {
				r3pExecAll(t, ctx, a, tc.stmts...)
			}
			checkNoLeakedState(t, b, "after A ran "+tc.stmts[len(tc.stmts)-1])
			aKeepsItsTenant(t, a, tc.tenant)
		})
	}
}
