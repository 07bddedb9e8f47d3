package integration

import (
	"strings"
	"testing"

	"github.com/pgowl/pgowl/internal/cluster"
)

// A write runs code pgowl's catalogue holds with another table than the one the
// statement names, or does not hold at all: the triggers of a table a foreign key's ON DELETE
// CASCADE writes, the CHECK of a domain a column is of, a generated column's expression, the
// ON TRUNCATE triggers of a table TRUNCATE ... CASCADE empties, the triggers of the partition a
// row is routed to, the row security policies of a write (an INSERT's WITH CHECK, a DELETE's
// USING). On a direct connection (checked first, on the primary) each of these leaves the tenant
// set with the session that wrote; through pgowl the other client sharing the backend must not
// get it.

const h1ReachSetup = `
CREATE OR REPLACE FUNCTION public.h1_tenant_trg() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-' || TG_TABLE_NAME, false);
	RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION public.h1_tenant_default() RETURNS int LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-default', false);
	RETURN NULL;
END $f$;
-- Declared IMMUTABLE (PostgreSQL does not check), as a generation expression requires.
CREATE OR REPLACE FUNCTION public.h1_tenant_gen(t text) RETURNS text IMMUTABLE LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-generated-' || t, false);
	RETURN t;
END $f$;
CREATE OR REPLACE FUNCTION public.h1_tenant_policy(what text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM set_config('review_state.tenant', 'from-policy-' || what, false);
	RETURN true;
END $f$;
DROP TABLE IF EXISTS public.h1_fk_child, public.h1_fk_parent, public.h1_fkd_child, public.h1_fkd_parent,
	public.h1_dom_t, public.h1_gen_t, public.h1_tr_child, public.h1_tr_parent, public.h1_part,
	public.h1_rls_ins, public.h1_rls_del CASCADE;
DROP DOMAIN IF EXISTS public.h1_tenant_dom;
-- ON DELETE CASCADE: deleting a parent row deletes the child rows, and the child's triggers fire.
CREATE TABLE public.h1_fk_parent (id int PRIMARY KEY);
CREATE TABLE public.h1_fk_child (pid int REFERENCES public.h1_fk_parent ON DELETE CASCADE);
CREATE TRIGGER t AFTER DELETE ON public.h1_fk_child FOR EACH ROW EXECUTE FUNCTION public.h1_tenant_trg();
-- ON DELETE SET DEFAULT: the child's column default runs.
CREATE TABLE public.h1_fkd_parent (id int PRIMARY KEY);
CREATE TABLE public.h1_fkd_child (pid int DEFAULT public.h1_tenant_default() REFERENCES public.h1_fkd_parent ON DELETE SET DEFAULT);
-- A column of a domain whose CHECK sets the tenant.
CREATE DOMAIN public.h1_tenant_dom AS text CHECK (set_config('review_state.tenant', 'from-domain-' || VALUE, false) IS NOT NULL);
CREATE TABLE public.h1_dom_t (d public.h1_tenant_dom);
-- A stored generated column.
CREATE TABLE public.h1_gen_t (a text, g text GENERATED ALWAYS AS (public.h1_tenant_gen(a)) STORED);
-- TRUNCATE ... CASCADE empties the referencing table, whose ON TRUNCATE trigger fires.
CREATE TABLE public.h1_tr_parent (id int PRIMARY KEY);
CREATE TABLE public.h1_tr_child (pid int REFERENCES public.h1_tr_parent);
CREATE TRIGGER t AFTER TRUNCATE ON public.h1_tr_child FOR EACH STATEMENT EXECUTE FUNCTION public.h1_tenant_trg();
-- A trigger on one partition only: a row inserted through the partitioned table is routed to it.
CREATE TABLE public.h1_part (id int) PARTITION BY LIST (id);
CREATE TABLE public.h1_part_1 PARTITION OF public.h1_part FOR VALUES IN (1);
CREATE TRIGGER t AFTER INSERT ON public.h1_part_1 FOR EACH ROW EXECUTE FUNCTION public.h1_tenant_trg();
-- Row security (forced, so that the owner is held to it too): an INSERT policy's WITH CHECK, and
-- a DELETE policy's USING.
CREATE TABLE public.h1_rls_ins (id int);
ALTER TABLE public.h1_rls_ins ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY ins ON public.h1_rls_ins FOR INSERT WITH CHECK (public.h1_tenant_policy('with-check'));
CREATE TABLE public.h1_rls_del (id int);
ALTER TABLE public.h1_rls_del ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY del ON public.h1_rls_del FOR DELETE USING (public.h1_tenant_policy('using'));
ALTER TABLE public.h1_rls_ins OWNER TO app; ALTER TABLE public.h1_rls_del OWNER TO app;
ALTER TABLE public.h1_fk_parent OWNER TO app; ALTER TABLE public.h1_fk_child OWNER TO app;
ALTER TABLE public.h1_fkd_parent OWNER TO app; ALTER TABLE public.h1_fkd_child OWNER TO app;
ALTER TABLE public.h1_dom_t OWNER TO app; ALTER TABLE public.h1_gen_t OWNER TO app;
ALTER TABLE public.h1_tr_parent OWNER TO app; ALTER TABLE public.h1_tr_child OWNER TO app;
ALTER TABLE public.h1_part OWNER TO app; ALTER TABLE public.h1_part_1 OWNER TO app;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO app;
`

// h1ReachRows puts back the rows a case's statement removes.
const h1ReachRows = `
DELETE FROM public.h1_fk_child; DELETE FROM public.h1_fk_parent;
INSERT INTO public.h1_fk_parent VALUES (1); INSERT INTO public.h1_fk_child VALUES (1);
DELETE FROM public.h1_fkd_child; DELETE FROM public.h1_fkd_parent;
INSERT INTO public.h1_fkd_parent VALUES (1), (2); INSERT INTO public.h1_fkd_child VALUES (2);
INSERT INTO public.h1_tr_parent VALUES (1) ON CONFLICT DO NOTHING;
DELETE FROM public.h1_rls_del; INSERT INTO public.h1_rls_del VALUES (1);
`

func TestAWriteRunsCodeOfTablesItReaches(t *testing.T) {
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, h1ReachSetup); err != nil {
		t.Fatalf("set up: %v", err)
	}
	for _, tc := range []struct {
		name, sql, tenant string
	}{
		{"ForeignKeyCascadeFiresChildTrigger", "DELETE FROM public.h1_fk_parent WHERE id = 1", "from-h1_fk_child"},
		{"ForeignKeySetDefaultRunsChildDefault", "DELETE FROM public.h1_fkd_parent WHERE id = 2", "from-default"},
		{"DomainCheckOfAColumn", "INSERT INTO public.h1_dom_t VALUES ('a')", "from-domain-a"},
		{"GeneratedColumn", "INSERT INTO public.h1_gen_t (a) VALUES ('z')", "from-generated-z"},
		{"TruncateCascadeFiresChildTruncateTrigger", "TRUNCATE public.h1_tr_parent CASCADE", "from-h1_tr_child"},
		{"RowRoutedToAPartitionWithATrigger", "INSERT INTO public.h1_part VALUES (1)", "from-h1_part_1"},
		{"RowSecurityWithCheckOfAnInsert", "INSERT INTO public.h1_rls_ins VALUES (1)", "from-policy-with-check"},
		{"RowSecurityUsingOfADelete", "DELETE FROM public.h1_rls_del", "from-policy-using"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkWriteKeepsItsStateWithItsClient(t, c, h1ReachRows, tc.sql, tenantProbe, tc.tenant)
		})
	}
}

// tenantProbe reads the tenant setting the write tests' functions set.
const tenantProbe = "SELECT coalesce(current_setting('review_state.tenant', true), '')"

// checkWriteKeepsItsStateWithItsClient runs sql as app directly on c's primary, where probe must
// then answer want (the oracle: PostgreSQL leaves the state with the session that wrote), then
// through a pgowl whose two clients share one backend: after the first runs sql, the second must
// find no state of it. rows runs before each, to put back what sql removes.
func checkWriteKeepsItsStateWithItsClient(t *testing.T, c *cluster.Cluster, rows, sql, probe, want string) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, rows); err != nil {
		t.Fatalf("rows: %v", err)
	}
	direct := danDirectAs(t, c.Nodes[0], appUser, appPassword, sql+"; "+probe)
	if !strings.Contains(direct, want) {
		t.Fatalf("oracle: directly on the primary, %s left %q; want %q", sql, direct, want)
	}
	if err := c.Nodes[0].Exec(ctx, rows); err != nil {
		t.Fatalf("rows: %v", err)
	}
	o := rvStartOneBackend(t, nil)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a, sql)
	checkNoLeakedState(t, b, "after A ran "+sql)
}
