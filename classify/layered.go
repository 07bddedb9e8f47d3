package classify

import (
	"iter"
	"maps"
	"math"
)

// minLayered is the most changed entries a layered index's top layer holds before it merges them
// into its middle layer, and the fewest its middle layer holds before it merges them into its base
// (see layered for the sizes past those).
const minLayered = 32

// layered is one index of a catalogue, shared with the catalogues derived from it
// (DeriveCatalogue), in three layers, none of which a catalogue modifies once another may read it:
// base, the entries when the index was last built whole; middle, the entries changed (set, or
// removed) since base was built; and changed, the entries changed since middle was built. A
// derived catalogue copies only changed and adds its own changes there. When changed outgrows
// the cube root of the index's size n (at least minLayered), it is merged into a new middle, and
// when middle outgrows the square root of n times that, into a new base. A derivation then copies
// on average a number of entries that grows as ∛n (changed's, and its share of the next middle
// and of the next base), where two layers (changed merged into base past √n) copied about
// 1.5·√n: TestLayeredIndexCopiesFewEntriesPerDerivation bounds the bytes they take. maps.Clone of a map of
// pointers costs about what inserting does. A lookup costs one more map lookup for each of middle
// and changed while they hold entries.
type layered[K comparable, V any] struct {
	base    map[K]V
	middle  map[K]layeredEntry[V]
	changed map[K]layeredEntry[V]
	size    int
}

// layeredEntry is an entry changed since a layered index's base: its value, or removed.
type layeredEntry[V any] struct {
	value   V
	present bool
}

// newLayered returns an index of m, which it owns from now on.
func newLayered[K comparable, V any](m map[K]V) layered[K, V] {
	return layered[K, V]{base: m, size: len(m)}
}

// get returns the value of key, and whether the index holds it.
func (l *layered[K, V]) get(key K) (V, bool) {
	if len(l.changed) > 0 {
		if e, ok := l.changed[key]; ok {
			return e.value, e.present
		}
	}
	return l.below(key)
}

// below returns the value of key in the layers under changed (middle, then base).
func (l *layered[K, V]) below(key K) (V, bool) {
	if len(l.middle) > 0 {
		if e, ok := l.middle[key]; ok {
			return e.value, e.present
		}
	}
	v, ok := l.base[key]
	return v, ok
}

// at returns the value of key, or V's zero value.
func (l *layered[K, V]) at(key K) V {
	v, _ := l.get(key)
	return v
}

// len returns how many keys the index holds.
func (l *layered[K, V]) len() int { return l.size }

// all yields every key the index holds, with its value, in no particular order.
func (l *layered[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for key, e := range l.changed {
			if e.present && !yield(key, e.value) {
				return
			}
		}
		for key, e := range l.middle {
			if _, changed := l.changed[key]; !changed && e.present && !yield(key, e.value) {
				return
			}
		}
		for key, v := range l.base {
			if _, changed := l.changed[key]; changed {
				continue
			}
			if _, inMiddle := l.middle[key]; !inMiddle && !yield(key, v) {
				return
			}
		}
	}
}

// own makes l, a copy of another catalogue's index, one that set and remove may change without
// changing the other: its top layer is copied (middle and base stay shared).
func (l *layered[K, V]) own() {
	l.changed = maps.Clone(l.changed)
	if l.changed == nil {
		l.changed = make(map[K]layeredEntry[V])
	}
}

// set makes key's value v; l must be owned (own).
func (l *layered[K, V]) set(key K, v V) {
	if _, ok := l.get(key); !ok {
		l.size++
	}
	l.changed[key] = layeredEntry[V]{value: v, present: true}
}

// remove takes key out; l must be owned (own).
func (l *layered[K, V]) remove(key K) {
	if _, ok := l.get(key); !ok {
		return
	}
	l.size--
	if _, below := l.below(key); below {
		l.changed[key] = layeredEntry[V]{}
	} else {
		delete(l.changed, key)
	}
}

// settle merges the top layer into a new middle one, and the middle one into a new base, when they
// have grown past what a derivation should copy (see layered). The layers it replaces stay as
// they were: other catalogues' indexes share them.
func (l *layered[K, V]) settle() {
	top := max(minLayered, cubeRoot(len(l.base)))
	if len(l.changed) <= top {
		return
	}
	middle := make(map[K]layeredEntry[V], len(l.middle)+len(l.changed))
	maps.Copy(middle, l.middle)
	for key, e := range l.changed {
		if _, inBase := l.base[key]; e.present || inBase {
			middle[key] = e
		} else {
			delete(middle, key) // removed, and base never held it
		}
	}
	l.middle, l.changed = middle, nil
	// Middle balances its own copies (its size every top derivations) against the base's (n
	// every middle's size of them): about the square root of n times top.
	if len(l.middle) <= max(minLayered, int(math.Sqrt(float64(len(l.base)*top)))) {
		return
	}
	base := maps.Clone(l.base)
	if base == nil {
		base = make(map[K]V, len(l.middle))
	}
	for key, e := range l.middle {
		if e.present {
			base[key] = e.value
		} else {
			delete(base, key)
		}
	}
	l.base, l.middle = base, nil
}

// cubeRoot returns the integer cube root of n (rounded down).
func cubeRoot(n int) int {
	r := 0
	for (r+1)*(r+1)*(r+1) <= n {
		r++
	}
	return r
}

// owning owns one layered index of a derived catalogue the first time the derivation changes it,
// and settles it at the end only then: an index the change leaves alone stays shared, uncopied.
type owning struct{ owned bool }

// ownable is a layered index of any key and value.
type ownable interface {
	own()
	settle()
}

func (o *owning) own(l ownable) {
	if !o.owned {
		l.own()
		o.owned = true
	}
}

func (o *owning) settle(l ownable) {
	if o.owned {
		l.settle()
	}
}
