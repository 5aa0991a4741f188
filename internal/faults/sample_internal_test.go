package faults

import "testing"

// TestShortSamplesEveryKindAndPlace: the faults -short runs are one in
// three, and among them every kind at both places (every third fault would
// be a stall each time).
func TestShortSamplesEveryKindAndPlace(t *testing.T) {
	all := Faults(9)
	seen := map[Fault]bool{}
	kinds, places := map[Kind]bool{}, map[Place]bool{}
	n := 0
	for i, f := range all {
		if !sampled(i) {
			continue
		}
		n++
		kinds[f.Kind], places[f.Place] = true, true
		seen[Fault{Kind: f.Kind, Place: f.Place}] = true
	}
	if n != len(all)/3 {
		t.Fatalf("sampled %d of %d faults, want a third", n, len(all))
	}
	if len(seen) != 6 {
		t.Fatalf("sampled kinds at places %v, want all 3 kinds at both places", seen)
	}
}
