package catalog_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/classify/catalog"
	"github.com/pgowl/pgowl/internal/syncbuf"
)

// TestAChangeOfAnyLoginDefaultIsTold: a backend keeps the settings ALTER ROLE and ALTER DATABASE
// ... SET gave its login, whichever they are, so Options.DefaultsChanged is told of a change of
// any of them in the database, not of search_path alone: a role's work_mem set, the database's
// statement_timeout set, the role's reset. A setting of the role in another database changes no
// login to this one and is not told. The changes are made on the primary itself and found by the
// change polls; the catalogue lists each setting (LoginDefaults).
func TestAChangeOfAnyLoginDefaultIsTold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE ROLE login_defaults_role")

	var logs syncbuf.Buffer
	var mu sync.Mutex
	told := map[string]int{}
	const poll = 50 * time.Millisecond
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 20 * time.Second, LoadTimeout: 10 * time.Second,
		ChangePollInterval: poll, Logger: zerolog.New(&logs).Level(zerolog.DebugLevel),
		DefaultsChanged: func(database string) {
			mu.Lock()
			defer mu.Unlock()
			told[database]++
		}})
	defer m.Close()
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue of app")
	}
	toldOfApp := func() int {
		mu.Lock()
		defer mu.Unlock()
		return told["app"]
	}
	listed := func(setting string) bool { return slices.Contains(m.Loaded("app").Data().LoginDefaults, setting) }
	step := func(what, sql string, wantTold bool, check func() bool) {
		t.Helper()
		before, unchangedReads := toldOfApp(), strings.Count(logs.String(), "function catalogue read: unchanged")
		exec(db, sql)
		waitUntil(t, 10*time.Second, what+": the catalogue holds it", logs.String, check)
		if wantTold {
			waitUntil(t, 10*time.Second, what+": DefaultsChanged told", logs.String, func() bool { return toldOfApp() > before })
			return
		}
		// The polls find the row written, and the whole read they ask for finds nothing that
		// applies here.
		waitUntil(t, 10*time.Second, what+": a whole read", logs.String, func() bool {
			return strings.Count(logs.String(), "function catalogue read: unchanged") > unchangedReads
		})
		if got := toldOfApp(); got != before {
			t.Errorf("%s: DefaultsChanged told %d times; a login to app starts as before", what, got-before)
		}
	}

	step("a role's work_mem", "ALTER ROLE login_defaults_role SET work_mem = '8MB'", true,
		func() bool { return listed("login_defaults_role@*: work_mem=8MB") })
	step("the database's statement_timeout", "ALTER DATABASE app SET statement_timeout = '7s'", true,
		func() bool { return listed("*@this database: statement_timeout=7s") })
	step("the role's setting in another database", "ALTER ROLE login_defaults_role IN DATABASE postgres SET work_mem = '9MB'", false,
		func() bool { return !listed("login_defaults_role@this database: work_mem=9MB") })
	step("the role's work_mem reset", "ALTER ROLE login_defaults_role RESET work_mem", true,
		func() bool { return !listed("login_defaults_role@*: work_mem=8MB") })
}
