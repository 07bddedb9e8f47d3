package classify

import (
	"maps"
	"math/rand"
	"testing"
)

// A layered index answers every lookup as a plain map given the same sets and removals would,
// across chains of derivations long enough to merge changes into new bases, and a derivation
// never changes the index it was derived from (two derived from the same one stay apart).
func TestLayeredIndexAnswersAsAMapAcrossDerivations(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	for round := range 10 {
		base := map[int]int{}
		for i := range rng.Intn(2000) {
			base[i] = i
		}
		type version struct {
			index layered[int, int]
			want  map[int]int
		}
		versions := []version{{newLayered(maps.Clone(base)), base}}
		for step := range 300 {
			from := versions[len(versions)-1]
			if rng.Intn(5) == 0 { // derive from an older version too
				from = versions[rng.Intn(len(versions))]
			}
			next := version{index: from.index, want: maps.Clone(from.want)}
			next.index.own()
			for range 1 + rng.Intn(4) {
				key := rng.Intn(2500)
				if rng.Intn(3) == 0 {
					next.index.remove(key)
					delete(next.want, key)
				} else {
					next.index.set(key, step)
					next.want[key] = step
				}
			}
			next.index.settle()
			versions = append(versions, next)
			check := func(i int) {
				v := &versions[i]
				if got := maps.Collect(v.index.all()); !maps.Equal(got, v.want) || v.index.len() != len(v.want) {
					t.Fatalf("round %d, step %d: version %d holds %d keys (counts %d), want %d", round, step, i, len(got), v.index.len(), len(v.want))
				}
			}
			check(len(versions) - 1)
			check(rng.Intn(len(versions)))
			if step == 299 {
				for i := range versions {
					check(i)
				}
			}
			for range 20 {
				key := rng.Intn(2500)
				got, ok := next.index.get(key)
				want, wantOK := next.want[key]
				if got != want || ok != wantOK {
					t.Fatalf("round %d, step %d: get(%d) = %d, %v; want %d, %v", round, step, key, got, ok, want, wantOK)
				}
			}
		}
	}
}
