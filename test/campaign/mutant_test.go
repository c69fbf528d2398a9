package campaign

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestHistoryCatchesStaleRead runs the campaign's cluster with a mutant
// nvstripe (build tag mutant_stale_read: the mapping answers one read of
// a block with what it held before its last write) and records, through
// the workload's own code, two acknowledged writes of a block and then a
// read of it: the read returns the first write's value, and the history
// check must say the history is not linearizable and save its
// visualisation. The same steps on another block, once the mutant has
// served its stale read, pass.
func TestHistoryCatchesStaleRead(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped under -short")
	}
	dir := t.TempDir()
	c := startCluster(t, buildBinary(t, dir, "mutant_stale_read"), dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newWorkload(c.ownerAddr)
	// steps writes block b twice and reads it; it returns the history
	// and the blocks' values before it.
	steps := func(b int64) (*history, func(blockKey) uint64) {
		h := newHistory()
		initial := w.begin(h)
		conn, err := dial(ctx, c.ownerAddr, rwVolume)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rng := rand.New(rand.NewPCG(1, 2))
		for range 2 {
			v, ok := w.claim(b, true)
			if !ok {
				t.Fatalf("block %d busy", b)
			}
			if err := w.write(ctx, conn, rng, h, 0, b, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.read(ctx, conn, h, 0, b); err != nil {
			t.Fatal(err)
		}
		return h, initial
	}
	h, initial := steps(5)
	res, err := h.check(initial, dir, "history-mutant.html")
	if !errors.Is(err, errNotLinearizable) {
		t.Fatalf("the mutant's stale read: %v (%d operations), want %v", err, res.ops, errNotLinearizable)
	}
	if fi, serr := os.Stat(filepath.Join(dir, "history-mutant.html")); serr != nil || fi.Size() == 0 {
		t.Errorf("no visualisation of the failing history: %v", serr)
	}
	t.Logf("caught: %v", err)
	h, initial = steps(6)
	if _, err := h.check(initial, dir, "history-after.html"); err != nil {
		t.Errorf("after the one stale read: %v", err)
	}
}
