package proxy

import (
	"strings"
	"testing"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/pool"
)

// TestRouteReasonCoversEveryReason: every classify reason has a router reason of the same code.
func TestRouteReasonCoversEveryReason(t *testing.T) {
	for r := classify.Reason(1); !strings.HasPrefix(r.String(), "REASON("); r++ {
		got, ok := routeReason(r)
		if !ok || got.String() != r.String() {
			t.Errorf("routeReason(%v) = %v, %v", r, got, ok)
		}
	}
	if _, ok := routeReason(classify.Reason(200)); ok {
		t.Error("an unknown reason was mapped")
	}
}

func TestStartupSearchPath(t *testing.T) {
	tests := []struct {
		params map[string]string
		want   []string
	}{
		{map[string]string{}, nil},
		{map[string]string{"search_path": "app, public"}, []string{"app", "public"}},
		{map[string]string{"search_path": `"Mixed Case",x`}, []string{"Mixed Case", "x"}},
		{map[string]string{"search_path": ""}, []string{}},
		{map[string]string{"options": "-c search_path=lib,public -c work_mem=4MB"}, []string{"lib", "public"}},
		{map[string]string{"options": "--search_path=lib"}, []string{"lib"}},
	}
	for _, tc := range tests {
		got := startupSearchPath(tc.params)
		if (got == nil) != (tc.want == nil) || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%v: got %q, want %q", tc.params, got, tc.want)
		}
	}
}

// TestSessionClassifyCachedDoesNotAllocate: the session's path to the classifier adds no allocation
// to a cached statement, and follows SET search_path.
func TestSessionClassifyCachedDoesNotAllocate(t *testing.T) {
	sess := &session{
		srv:      &Server{opts: Options{Classifier: classify.New(classify.Options{})}},
		database: "app", user: "app",
		login: pool.Login{Params: map[string]string{"search_path": "lib, public"}},
	}
	sql := "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
	params := []uint32{23}
	sess.classify(sql, params)
	if allocs := testing.AllocsPerRun(500, func() { sess.classify(sql, params) }); allocs != 0 {
		t.Errorf("a cached statement costs %.1f allocations per call", allocs)
	}
	if got := strings.Join(sess.cls.ctx.SearchPath, ","); got != "lib,public" {
		t.Errorf("startup search_path: %q", got)
	}
	sess.settings.sets = append(sess.settings.sets, "SET search_path TO other")
	sess.settings.updateKey()
	sess.classify(sql, nil)
	if got := strings.Join(sess.cls.ctx.SearchPath, ","); got != "other" {
		t.Errorf("after SET search_path: %q", got)
	}
	// A SET that replaces the recorded one leaves as many entries: still seen.
	sess.settings.sets = []string{"SET search_path TO second"}
	sess.settings.updateKey()
	sess.classify(sql, nil)
	if got := strings.Join(sess.cls.ctx.SearchPath, ","); got != "second" {
		t.Errorf("after a second SET search_path: %q", got)
	}
	sess.settings.sets = append(sess.settings.sets, "RESET search_path")
	sess.settings.updateKey()
	sess.classify(sql, nil)
	if got := strings.Join(sess.cls.ctx.SearchPath, ","); got != "lib,public" {
		t.Errorf("after RESET search_path: %q", got)
	}
	sess.settings.sets = append(sess.settings.sets, "SELECT set_config('search_path', current_setting('x'), false)")
	sess.settings.updateKey()
	sess.classify(sql, nil)
	if !sess.cls.ctx.SearchPathUnknown {
		t.Errorf("after set_config of an expression the search path must be unknown")
	}
}

// TestAnEmptySearchPathIsNoSchemaNotTheDefault: a path the session set empty, by SET or as a
// value read from the node (SHOW search_path gives ""), resolves in no schema of its own; nil
// would mean the database's default path.
func TestAnEmptySearchPathIsNoSchemaNotTheDefault(t *testing.T) {
	for _, set := range []string{
		"SET search_path = ''",
		`SELECT pg_catalog.set_config('search_path', '""', false)`,
		"SELECT pg_catalog.set_config('search_path', '', false)",
		`SELECT pg_catalog.set_config('search_path', '""', true)`,
	} {
		sess := &session{srv: &Server{opts: Options{Classifier: classify.New(classify.Options{})}}, database: "app", user: "app"}
		sess.settings.sets = []string{set}
		sess.settings.updateKey()
		sess.classify("SELECT 1", nil)
		if sess.cls.ctx.SearchPath == nil || sess.cls.ctx.SearchPathUnknown || strings.Join(sess.cls.ctx.SearchPath, "") != "" {
			t.Errorf("after %s the path is %q (unknown %v), want no schema", set, sess.cls.ctx.SearchPath, sess.cls.ctx.SearchPathUnknown)
		}
	}
}
