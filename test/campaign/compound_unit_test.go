package campaign

import (
	"math/rand/v2"
	"testing"
)

// TestCompoundPicks: every pair names a kind of fault; a compound round
// picks two or three distinct kinds, the same ones for the same seed (the
// replay command depends on it); a single round picks faults[seed mod
// len(faults)] and draws nothing from the round's rng.
func TestCompoundPicks(t *testing.T) {
	for _, p := range compoundPairs {
		known := func(name string) bool { return hasFault(faults, name) || hasFault(compoundOnly, name) }
		if !known(p[0]) || !known(p[1]) || p[0] == p[1] {
			t.Errorf("pair %q: not two kinds of fault", p)
		}
	}
	sizes := map[int]int{}
	for sd := uint64(0); sd < 200; sd++ {
		a := pickFaults(sd, true, rand.New(rand.NewPCG(sd, 0)))
		b := pickFaults(sd, true, rand.New(rand.NewPCG(sd, 0)))
		if faultNames(a) != faultNames(b) {
			t.Fatalf("seed %d: %s, then %s", sd, faultNames(a), faultNames(b))
		}
		seen := map[string]bool{}
		for _, f := range a {
			if seen[f.name] {
				t.Fatalf("seed %d: %s twice", sd, f.name)
			}
			seen[f.name] = true
		}
		sizes[len(a)]++
	}
	if sizes[2] == 0 || sizes[3] == 0 || sizes[2]+sizes[3] != 200 {
		t.Errorf("rounds by number of faults: %v, want 2 and 3 only, both", sizes)
	}
	rng := rand.New(rand.NewPCG(1, 0))
	want := rng.Uint64()
	rng = rand.New(rand.NewPCG(1, 0))
	if fs := pickFaults(ciSeed, false, rng); len(fs) != 1 || fs[0].name != faults[ciSeed%uint64(len(faults))].name {
		t.Errorf("single round of the CI seed: %s", faultNames(fs))
	}
	if rng.Uint64() != want {
		t.Error("a single round's pick drew from the round's rng: old seeds would not replay")
	}
	for sd := uint64(ciSeed); sd < ciSeed+6; sd++ {
		t.Logf("compound seed %d: %s", sd, faultNames(pickFaults(sd, true, rand.New(rand.NewPCG(sd, 0)))))
	}
}
