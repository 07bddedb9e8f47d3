package integration

import (
	"testing"
)

// stateLeakIndirectSetup creates objects through which an ordinary statement calls a function
// that changes session state with constant arguments: a trigger, a rule, a column default, a
// CHECK constraint, a view and an operator.
func stateLeakIndirectSetup(t *testing.T) {
	t.Helper()
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, `
	CREATE OR REPLACE FUNCTION public.review_state_audit_tenant() RETURNS trigger LANGUAGE plpgsql AS $f$
	BEGIN
		PERFORM set_config('review_state.tenant', NEW.tenant, false);
		RETURN NEW;
	END $f$;
	CREATE OR REPLACE FUNCTION public.review_state_audit_role() RETURNS trigger LANGUAGE plpgsql AS $f$
	BEGIN
		PERFORM set_config('role', 'review_state_role', false);
		RETURN NEW;
	END $f$;
	CREATE OR REPLACE FUNCTION public.review_state_audit_lock() RETURNS trigger LANGUAGE plpgsql AS $f$
	BEGIN
		PERFORM pg_advisory_lock(7520);
		RETURN NEW;
	END $f$;
	DROP TABLE IF EXISTS public.review_state_trig_tenant, public.review_state_trig_role, public.review_state_trig_lock,
		public.review_state_rule, public.review_state_default, public.review_state_check CASCADE;
	CREATE TABLE public.review_state_trig_tenant (tenant text);
	CREATE TRIGGER t BEFORE INSERT ON public.review_state_trig_tenant FOR EACH ROW EXECUTE FUNCTION public.review_state_audit_tenant();
	CREATE TABLE public.review_state_trig_role (id int);
	CREATE TRIGGER t BEFORE INSERT ON public.review_state_trig_role FOR EACH ROW EXECUTE FUNCTION public.review_state_audit_role();
	CREATE TABLE public.review_state_trig_lock (id int);
	CREATE TRIGGER t BEFORE INSERT ON public.review_state_trig_lock FOR EACH ROW EXECUTE FUNCTION public.review_state_audit_lock();
	CREATE TABLE public.review_state_rule (id int);
	CREATE RULE r AS ON INSERT TO public.review_state_rule DO ALSO SELECT set_config('role', 'review_state_role', false);
	CREATE TABLE public.review_state_default (id int, r text DEFAULT set_config('role', 'review_state_role', false));
	CREATE TABLE public.review_state_check (id int CHECK (set_config('review_state.tenant', 'from-check', false) IS NOT NULL));
	CREATE OR REPLACE VIEW public.review_state_view AS SELECT set_config('role', 'review_state_role', false) AS r;
	CREATE OR REPLACE FUNCTION public.review_state_op(int, int) RETURNS bool LANGUAGE sql AS
		$f$ SELECT set_config('role', 'review_state_role', false) IS NOT NULL $f$;
	DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_operator WHERE oprname = '#~#' AND oprnamespace = 'public'::regnamespace
				AND oprleft = 'int'::regtype AND oprright = 'int'::regtype) THEN
			CREATE OPERATOR public.#~# (LEFTARG = int, RIGHTARG = int, FUNCTION = public.review_state_op);
		END IF;
	END $$;
	CREATE OR REPLACE PROCEDURE public.review_state_proc_exec(stmt text) LANGUAGE plpgsql AS $f$
	BEGIN
		EXECUTE stmt;
	END $f$;
	CREATE OR REPLACE FUNCTION public.review_state_sql_role() RETURNS void LANGUAGE sql AS $f$ SET ROLE review_state_role $f$;
	GRANT ALL ON public.review_state_trig_tenant, public.review_state_trig_role, public.review_state_trig_lock,
		public.review_state_rule, public.review_state_default, public.review_state_check, public.review_state_view TO `+appUser+`;
	GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO `+appUser+`;
	GRANT EXECUTE ON ALL PROCEDURES IN SCHEMA public TO `+appUser); err != nil {
		t.Fatalf("set up: %v", err)
	}
	catchUp(t, c)
}

// TestSessionStateReachedIndirectly: the function that changes session state is reached not by a
// call in the statement's text but through a trigger, a rule, a default, a CHECK constraint, a
// view or an operator, or by a procedure's or SQL function's body. On a direct connection the
// state stays with the client that ran the statement; the other client sharing the backend must
// not get it.
func TestSessionStateReachedIndirectly(t *testing.T) {
	stateLeakIndirectSetup(t)
	for _, tc := range []struct {
		name, sql string
	}{
		{"TriggerSetsTenant", "INSERT INTO public.review_state_trig_tenant VALUES ('tenant-a')"},
		{"TriggerSetsRole", "INSERT INTO public.review_state_trig_role VALUES (1)"},
		{"TriggerTakesLock", "INSERT INTO public.review_state_trig_lock VALUES (1)"},
		{"RuleSetsRole", "INSERT INTO public.review_state_rule VALUES (1)"},
		{"DefaultSetsRole", "INSERT INTO public.review_state_default (id) VALUES (1)"},
		{"CheckSetsTenant", "INSERT INTO public.review_state_check VALUES (1)"},
		{"ViewSetsRole", "SELECT r FROM public.review_state_view"},
		{"OperatorSetsRole", "SELECT 1 OPERATOR(public.#~#) 1"},
		{"ProcedureExecSetRole", "CALL public.review_state_proc_exec('SET ROLE review_state_role')"},
		{"SQLFunctionSetRole", "SELECT public.review_state_sql_role()"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := rvStartOneBackend(t, nil)
			ctx := timeoutCtx(t, statementTimeout)
			a := o.connect(t, nil).PgConn()
			b := o.connect(t, nil).PgConn()
			r3pExecAll(t, ctx, a, tc.sql)
			if leak := leakedState(t, b, "after A ran "+tc.sql); leak != "" {
				t.Error(leak)
			}
		})
	}
}
