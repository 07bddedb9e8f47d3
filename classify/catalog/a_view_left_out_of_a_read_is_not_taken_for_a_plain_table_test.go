package catalog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// TestAViewLeftOutOfAReadIsNotTakenForAPlainTable holds an ACCESS EXCLUSIVE lock on the table
// under a view while the whole catalogue is read: pg_get_viewdef waits on it past every retry, so
// the view is left out. Its pg_class row is still read (the relations' read locks nothing), so
// the catalogue must not take the view for a plain table: a SELECT of a view that calls a writing
// function must not be a read.
func TestAViewLeftOutOfAReadIsNotTakenForAPlainTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, connect := startPrimaryWithAWritingView(t, ctx)
	conn, err := connect(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	classifier := classify.New(classify.Options{CacheSize: -1})
	session := &classify.Context{Database: "postgres", User: "postgres"}
	before, err := catalog.Load(ctx, conn, "postgres", catalog.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if got := classifier.ClassifyWith(writingViewRead, session, before); got.Access != classify.Write {
		t.Fatalf("before the lock: %s: %v %v (%s), want a write", writingViewRead, got.Access, got.Reason, got.Subject)
	}

	release := lockTheTableUnderTheView(t, ctx, primary)
	defer release()
	during, err := catalog.Load(ctx, conn, "postgres", catalog.Overrides{})
	if err != nil {
		t.Fatalf("load beside the lock failed: %v", err)
	}
	t.Logf("warnings: %q", during.Warnings())
	leftOut := false
	for _, w := range during.Warnings() {
		leftOut = leftOut || strings.Contains(w, "left out views")
	}
	if !leftOut {
		t.Fatal("the view was not left out beside the lock: the test shows nothing")
	}
	if got := classifier.ClassifyWith(writingViewRead, session, during); got.Access != classify.Write {
		t.Errorf("with the view left out: %s: %v %v (%s), want a write (or unknown): the view is taken for a plain table", writingViewRead, got.Access, got.Reason, got.Subject)
	}
}
