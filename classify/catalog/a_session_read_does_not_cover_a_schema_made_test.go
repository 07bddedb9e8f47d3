package catalog

import (
	"testing"

	"github.com/pgowl/pgowl/classify"
)

// TestASessionReadDoesNotCoverASchemaMade: a session's read of its own change never reads the
// list of schemas (PrepareSessionRead declines a change that makes one), so it does not cover a
// pending change that made a schema: patching with it would clear the pending change and leave
// the schema out of the list.
func TestASessionReadDoesNotCoverASchemaMade(t *testing.T) {
	read := &classify.CatalogueChanges{Functions: []string{"f"}}
	for _, tc := range []struct {
		pending *classify.CatalogueChanges
		want    bool
	}{
		{&classify.CatalogueChanges{Functions: []string{"f"}}, true},
		{&classify.CatalogueChanges{Schemas: []string{"s"}}, false},
		{&classify.CatalogueChanges{Functions: []string{"f"}, Schemas: []string{"s"}}, false},
	} {
		if got := tc.pending.Within(read); got != tc.want {
			t.Errorf("(%+v).Within(%+v) = %v, want %v", *tc.pending, *read, got, tc.want)
		}
	}
}
