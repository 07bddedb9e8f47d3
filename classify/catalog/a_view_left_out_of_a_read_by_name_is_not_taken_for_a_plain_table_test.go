package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// TestAViewLeftOutOfAReadByNameIsNotTakenForAPlainTable: a read by name of a view (after a change
// told of it) runs while the table under it is held ACCESS EXCLUSIVE past every retry, so the
// view is left out. Until the view is read again, a SELECT of it (it calls a writing function)
// must not be a read. Once the lock is gone it is still not read again (a known gap, reported by
// the log).
func TestAViewLeftOutOfAReadByNameIsNotTakenForAPlainTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, connect := startPrimaryWithAWritingView(t, ctx)
	m := catalog.New(catalog.Options{Connect: connect, Wait: 20 * time.Second})
	defer m.Close()
	classifier := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	session := &classify.Context{Database: "postgres", User: "postgres"}
	if got := classifier.ClassifyIn(writingViewRead, session); got.Access != classify.Write {
		t.Fatalf("before the lock: %v %v (%s), want a write", got.Access, got.Reason, got.Subject)
	}

	release := lockTheTableUnderTheView(t, ctx, primary)
	classifier.CatalogueChanged(session, &classify.CatalogueChanges{Relations: []string{"writes_view"}})
	got := classifier.ClassifyIn(writingViewRead, session)
	t.Logf("warnings: %q", m.Loaded("postgres").Warnings())
	if got.Access != classify.Write {
		t.Errorf("with the view left out of the read by name: %v %v (%s), want a write (or unknown)", got.Access, got.Reason, got.Subject)
	}
	release()
	got = classifier.ClassifyIn(writingViewRead, session)
	if got.Access != classify.Write {
		t.Errorf("after the lock is gone: %v %v (%s), want a write", got.Access, got.Reason, got.Subject)
	}
	if got.Reason == classify.ReasonUnknownEffect {
		// Known gap: nothing reads a left-out name again but a change of it or the next whole
		// read; until then the view's uses go to the primary as unknown (safe, not precise).
		t.Logf("known gap: after the lock is gone the view is still not read again: %v %v (%s)", got.Access, got.Reason, got.Subject)
	}
}
