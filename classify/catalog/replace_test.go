package catalog

import (
	"cmp"
	"slices"
	"testing"
)

func TestReplaceMergesFreshObjectsInOrderAndKeepsAnUnchangedList(t *testing.T) {
	type object struct {
		oid  uint32
		name string
	}
	byOID := func(a, b *object) int { return cmp.Compare(a.oid, b.oid) }
	named := func(names ...string) func(*object) bool {
		return func(o *object) bool { return slices.Contains(names, o.name) }
	}
	list := []object{{1, "a"}, {3, "b"}, {5, "c"}, {7, "d"}}
	for _, c := range []struct {
		name    string
		drop    []string
		fresh   []object
		want    []object
		changed bool
	}{
		{name: "a new object after every other", drop: []string{"e"}, fresh: []object{{9, "e"}},
			want: []object{{1, "a"}, {3, "b"}, {5, "c"}, {7, "d"}, {9, "e"}}, changed: true},
		{name: "a new object between two", drop: []string{"e"}, fresh: []object{{4, "e"}},
			want: []object{{1, "a"}, {3, "b"}, {4, "e"}, {5, "c"}, {7, "d"}}, changed: true},
		{name: "an object replaced by a new OID", drop: []string{"b"}, fresh: []object{{8, "b"}},
			want: []object{{1, "a"}, {5, "c"}, {7, "d"}, {8, "b"}}, changed: true},
		{name: "an object dropped", drop: []string{"a"}, fresh: nil,
			want: []object{{3, "b"}, {5, "c"}, {7, "d"}}, changed: true},
		{name: "an object read again as it was", drop: []string{"c"}, fresh: []object{{5, "c"}}, want: list},
		{name: "a name that names nothing", drop: []string{"z"}, fresh: nil, want: list},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, removed, added, changed := replace(list, c.fresh, named(c.drop...), byOID, func(more []object) []object {
				return append(list[:len(list):len(list)], more...)
			})
			if changed != c.changed || !slices.Equal(got, c.want) {
				t.Fatalf("replace = %v, %v; want %v, %v", got, changed, c.want, c.changed)
			}
			// What it took out and put in, which DeriveCatalogue indexes: nothing when unchanged.
			var wantRemoved, wantAdded []object
			if changed {
				wantRemoved = slices.DeleteFunc(slices.Clone(list), func(o object) bool { return !named(c.drop...)(&o) })
				wantAdded = c.fresh
			}
			if !slices.Equal(removed, wantRemoved) || !slices.Equal(added, wantAdded) {
				t.Fatalf("replace took out %v and put in %v; want %v and %v", removed, added, wantRemoved, wantAdded)
			}
			if !changed && &got[0] != &list[0] {
				t.Fatal("an unchanged list was copied")
			}
			if !slices.Equal(list, []object{{1, "a"}, {3, "b"}, {5, "c"}, {7, "d"}}) {
				t.Fatalf("replace modified its list: %v", list)
			}
		})
	}
}
