package catalog

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/internal/cluster"
)

// TestDefaultSearchPathFollowsPostgresPrecedence: the search_path pgowl takes a new session of
// each role to start with is the one PostgreSQL gives it, at every level a default can be set:
// the role in this database, the role, this database (ALTER DATABASE, or ALTER ROLE ALL IN
// DATABASE), every role in every database (ALTER ROLE ALL), the server's configuration, read
// when the loader's own role has a setting. The oracle is a login of each role, which shows the
// path PostgreSQL applied.
func TestDefaultSearchPathFollowsPostgresPrecedence(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	roles := []string{"plain", "own", "own_here", "both_levels"}
	var users []cluster.User
	for _, r := range roles {
		users = append(users, cluster.User{Name: r, Password: "secret"})
	}
	primary := cluster.StartForTest(t, cluster.Options{Users: users}).Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	setup := connectForTest(t, ctx, primary)

	loadAndCompare := func(t *testing.T, stage string) {
		t.Helper()
		loader := connectForTest(t, ctx, primary)
		data := classify.CatalogueData{DefaultSearchPath: map[string][]string{}}
		if err := loadDefaultSearchPaths(ctx, loader, &data); err != nil {
			t.Fatal(err)
		}
		for _, role := range roles {
			conn, err := pgx.Connect(ctx, primary.DSN(role, "secret", "postgres"))
			if err != nil {
				t.Fatal(err)
			}
			var shown string
			err = conn.QueryRow(ctx, "SHOW search_path").Scan(&shown)
			conn.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := classify.SplitSearchPath(shown)
			got, ok := data.DefaultSearchPath[role]
			if !ok {
				got = data.DefaultSearchPath[""]
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: role %s starts with %q; pgowl takes %q", stage, role, want, got)
			}
		}
	}

	steps := []struct{ stage, sql string }{
		{"server default only", ""},
		{"every role in every database", "ALTER ROLE ALL SET search_path = g_all, public"},
		{"and this database", "ALTER DATABASE postgres SET search_path = g_db, public"},
		{"and roles of their own", `
ALTER ROLE own SET search_path = g_own, public;
ALTER ROLE own_here IN DATABASE postgres SET search_path = g_own_here, public;
ALTER ROLE both_levels SET search_path = g_both_everywhere, public;
ALTER ROLE both_levels IN DATABASE postgres SET search_path = g_both_here, public`},
		{"this database's, set as every role's in it", `
ALTER DATABASE postgres RESET search_path;
ALTER ROLE ALL IN DATABASE postgres SET search_path = g_all_here, public`},
		{"every role's in every database reset", "ALTER ROLE ALL RESET search_path"},
		{"the configuration file's, the loader with a setting of its own", `
ALTER ROLE ALL IN DATABASE postgres RESET search_path;
ALTER SYSTEM SET search_path = g_file, public;
SELECT pg_reload_conf();
ALTER ROLE postgres SET search_path = g_loader, public`},
	}
	for _, s := range steps {
		for _, sql := range strings.Split(s.sql, ";\n") { // one at a time: ALTER SYSTEM runs in no block
			if strings.TrimSpace(sql) == "" {
				continue
			}
			if _, err := setup.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", s.stage, err)
			}
		}
		loadAndCompare(t, s.stage)
	}
}

// TestDefaultSearchPathsDoNotDependOnTheOrderOfTheSettings: pg_db_role_setting's rows come in no
// particular order; every order of the same settings gives the same defaults. An ALTER ROLE ALL
// setting read before an ALTER DATABASE one took the database's place.
func TestDefaultSearchPathsDoNotDependOnTheOrderOfTheSettings(t *testing.T) {
	settings := []defaultSearchPathSetting{
		{role: "", inDatabase: false, value: "g_all"},
		{role: "", inDatabase: true, value: "g_db"},
		{role: "own", inDatabase: false, value: "g_own"},
		{role: "own", inDatabase: true, value: "g_own_here"},
		{role: "away", inDatabase: false, value: "g_away"},
	}
	want := map[string]string{"": "g_db", "own": "g_own_here", "away": "g_away"}
	var permute func(k int)
	permute = func(k int) {
		if k == len(settings) {
			if got := defaultSearchPaths("srv", settings); !maps.Equal(got, want) {
				t.Errorf("settings in the order %v: %v, want %v", settings, got, want)
			}
			return
		}
		for i := k; i < len(settings); i++ {
			settings[k], settings[i] = settings[i], settings[k]
			permute(k + 1)
			settings[k], settings[i] = settings[i], settings[k]
		}
	}
	permute(0)
	if got := defaultSearchPaths("srv", nil); !maps.Equal(got, map[string]string{"": "srv"}) {
		t.Errorf("no settings: %v, want the server's", got)
	}
}
