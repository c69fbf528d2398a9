package volume

import (
	"context"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
)

// TestRecoverCutOffMarksNothing: the owner of a 4+2 volume crashes in the
// middle of writes; one namespace is lost, and the next owner (the
// controller, say) is cut off from two more, which everyone else still
// reaches. Its Recover cannot settle a stripe with three shards missing
// and must fail without recording anything: had it marked the two
// namespaces it cannot reach stale (as a parity slot that missed a
// stripe's settling), every segment would keep three stale slots for
// good. The owner after it, which reaches them again, recovers the volume,
// and every block reads its old value or one written since.
func TestRecoverCutOffMarksNothing(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[1]
	for seed := int64(1); seed <= 3; seed++ {
		size := 2 * g.SegmentData()
		r := newRig(t, g, size, rigOptions{crashable: true})
		h := &hole{r: r, old: pattern(int(size), 1), devs: DeviceMap{}, lostNS: r.names[2]}
		if err := r.vol.WriteAt(ctx, h.old, 0); err != nil {
			t.Fatal(err)
		}
		if err := r.vol.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		h.may = holeWorkload(t, r, h.old)
		rng := rand.New(rand.NewSource(seed))
		for i, m := range r.mems {
			h.devs[r.names[i]] = m.CrashCloneRand(rng)
		}
		gone := faultdev.New(h.devs[h.lostNS], seed)
		gone.SetDown(true)
		h.devs[h.lostNS] = gone

		cutOff := DeviceMap{}
		for name, d := range h.devs {
			cutOff[name] = d
		}
		for _, name := range r.names[:2] {
			fd := faultdev.New(h.devs[name], seed)
			fd.SetDown(true)
			cutOff[name] = fd
		}
		r.reopen(t, cutOff)
		if _, err := r.vol.Recover(ctx); !errorsIsUnavailable(err) {
			t.Fatalf("seed %d: recover by an owner that reaches 3 of 6 namespaces: got %v, want a failure of class ErrUnavailable", seed, err)
		}
		marks, err := r.stale.Stale(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range marks {
			if m.Ref.NS == r.names[0] || m.Ref.NS == r.names[1] {
				t.Fatalf("seed %d: the cut-off owner marked segment %d slot %d on %s stale; it only failed to reach it", seed, m.Segment, m.Slot, m.Ref.NS)
			}
		}

		r.reopen(t, h.devs)
		if _, err := r.vol.Recover(ctx); err != nil {
			t.Fatalf("seed %d: recover by an owner that reaches all but the lost namespace: %v", seed, err)
		}
		h.check(t)
	}
}

func errorsIsUnavailable(err error) bool {
	return err != nil && blockdev.Class(err) == blockdev.ErrUnavailable
}
