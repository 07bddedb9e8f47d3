package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// A session derives the catalogue with the object its CREATE makes while the node runs the
// statement (Manager.PrepareTake), and has the uses of the object analysed in it
// (Classifier.PrepareUses). Once the statement has committed, TakePrepared stores that very
// catalogue when the held one is still the one it was derived from; when another change was stored
// meanwhile, the object is taken in over the new catalogue instead, and nothing of either change
// is lost. A take prepared for a statement that never committed is never stored. The uses
// classify as they would on a catalogue read afterwards, whether their analysis was prepared or
// not. Each statement runs on a real server.
func TestPreparedTakeIsStoredOnlyOverItsCatalogue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, "CREATE TABLE audit (msg text)")

	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second})
	defer m.Close()
	classifier := classify.New(classify.Options{Catalogues: m})
	session := &classify.Context{Database: "app", User: "postgres"}
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	// prepare classifies a CREATE and prepares its take and its uses, as the proxy does while
	// the node runs it.
	prepare := func(sql string) (*classify.CatalogueChanges, *catalog.PreparedTake) {
		t.Helper()
		effects := classifier.ClassifyIn(sql, session)
		changes := effects.CatalogueChanges
		if changes == nil || changes.Created == nil {
			t.Fatalf("%s: nothing to take from the statement (changes %+v)", sql, changes)
		}
		take := m.PrepareTake("app", changes.Created, session)
		if take == nil {
			t.Fatalf("%s: no take prepared", sql)
		}
		classifier.PrepareUses(take.Catalogue(), take.Taken(), session)
		return changes, take
	}

	// Nothing changed meanwhile: the prepared catalogue is the one stored.
	reads := "CREATE FUNCTION reads_audit() RETURNS bigint LANGUAGE sql STABLE AS $$ SELECT count(*) FROM audit $$"
	changes, take := prepare(reads)
	if m.Loaded("app") == take.Catalogue() {
		t.Fatal("PrepareTake stored its catalogue before the statement committed")
	}
	exec(db, reads)
	if !m.TakePrepared("app", changes, take) {
		t.Fatalf("%s: read instead of taken", reads)
	}
	if m.Loaded("app") != take.Catalogue() {
		t.Errorf("%s: the catalogue stored is not the one prepared", reads)
	}

	// Another change is stored between the prepare and the take (here another session's, read
	// by the catalogue's own connection): the prepared catalogue misses it, so the object is
	// taken in over the catalogue that has it.
	writes := "CREATE FUNCTION writes_audit(m text) RETURNS void LANGUAGE plpgsql AS $$ BEGIN INSERT INTO audit VALUES (m); END $$"
	changes, take = prepare(writes)
	between := "CREATE FUNCTION calls_writer() RETURNS void LANGUAGE sql AS $$ SELECT 1 $$"
	exec(db, between)
	m.Changed("app", &classify.CatalogueChanges{Everything: true}, true)
	if findFunction(m.Catalogue("app"), "public", "calls_writer", "") == nil {
		t.Fatalf("%s: not read", between)
	}
	exec(db, writes)
	if !m.TakePrepared("app", changes, take) {
		t.Fatalf("%s: read instead of taken", writes)
	}
	held := m.Loaded("app")
	if held == take.Catalogue() {
		t.Errorf("%s: the catalogue prepared before %q was stored over it", writes, between)
	}
	for _, f := range [][2]string{{"reads_audit", ""}, {"writes_audit", "text"}, {"calls_writer", ""}} {
		if findFunction(held, "public", f[0], f[1]) == nil {
			t.Errorf("the catalogue lost %s(%s)", f[0], f[1])
		}
	}

	// A CREATE prepared but never run (it failed, or its session went) leaves the catalogue as
	// it was.
	_, _ = prepare("CREATE FUNCTION never_made() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$")
	if findFunction(m.Loaded("app"), "public", "never_made", "") != nil {
		t.Error("a take prepared for a statement that never ran was stored")
	}

	// The uses classify as on a catalogue read from scratch.
	fresh := classify.New(classify.Options{Catalogues: catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second})})
	for _, use := range []struct {
		sql    string
		access classify.Access
	}{
		{"SELECT reads_audit()", classify.Read},
		{"SELECT writes_audit('x')", classify.Write},
		{"SELECT calls_writer()", classify.Read},
	} {
		got, want := classifier.ClassifyIn(use.sql, session), fresh.ClassifyIn(use.sql, session)
		if got.Access != use.access || got.Access != want.Access || got.Reason != want.Reason {
			t.Errorf("%s: %v %v (%s); on a catalogue read afresh %v %v (%s); want %v", use.sql,
				got.Access, got.Reason, got.Subject, want.Access, want.Reason, want.Subject, use.access)
		}
	}
}
