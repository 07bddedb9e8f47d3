package classify

import (
	"runtime"
	"testing"
)

// A derivation that changes one entry copies few entries however large the index is: the bytes
// a chain of such derivations allocates, per derivation, stay within what about 4·∛n entries
// take (n the index's size, at least 2 KiB). An index of two layers, which merged its changes
// straight into its base past √n of them, allocated 3.6 KiB per derivation at 3000 entries and
// 10 KiB at 30000 (amd64, Go 1.26), and fails this; three layers allocate 1.5 and 2.3 KiB. A
// catalogue derives its indexes once per change a migration makes (DeriveCatalogue,
// KeepAnalysesFrom).
func TestLayeredIndexCopiesFewEntriesPerDerivation(t *testing.T) {
	for _, size := range []int{3000, 30000} {
		base := make(map[int]*int, size)
		for i := range size {
			base[i] = new(int)
		}
		index := newLayered(base)
		const derivations = 3000
		value := new(int)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range derivations {
			next := index
			next.own()
			next.set(size+i, value)
			next.settle()
			index = next
		}
		runtime.ReadMemStats(&after)
		perDerivation := float64(after.TotalAlloc-before.TotalAlloc) / derivations
		// An entry of a map[int]*int takes 16 bytes and its slot's share of control bytes and
		// load factor about 8 more: 4·∛n entries at 24 bytes is the bound.
		bound := 4 * float64(cubeRoot(size)+1) * 24
		if perDerivation > max(bound, 2048) {
			t.Errorf("%d entries: a derivation allocates %.0f bytes, want at most %.0f", size, perDerivation, max(bound, 2048))
		}
		t.Logf("%d entries: %.0f bytes allocated per derivation", size, perDerivation)
		if index.len() != size+derivations {
			t.Fatalf("the index holds %d entries, want %d", index.len(), size+derivations)
		}
	}
}
