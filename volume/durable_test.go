package volume

import (
	"bytes"
	"context"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestRepairDurableBeforeClear: a namespace misses writes (its slot gets
// a stale mark: by stripe for writes that went around it, as a whole when
// it was away as the segment was allocated too), comes back, and Repair rebuilds the slot and
// clears the mark; then the owner and the devices crash before any Flush
// (the devices keep only what was flushed). Repair returning means the
// slot counts as whole again, so a new owner with two other namespaces
// away must read the last writes: the rebuilt blocks and their checksums
// must be on the device before the mark goes. Had only the data been
// flushed, the rebuilt slot would be trusted with blocks that fail their
// checksums, one shard more than parity covers. With every namespace
// there, the new owner reads the last writes too (a read heals such
// blocks from the other shards) and finds no block to heal.
func TestRepairDurableBeforeClear(t *testing.T) {
	for _, g := range []layout.Geometry{csumLayouts[1], csumLayouts[3]} {
		t.Run(g.String(), func(t *testing.T) { repairDurableBeforeClear(t, g) })
	}
}

func repairDurableBeforeClear(t *testing.T, g layout.Geometry) {
	ctx := context.Background()
	size := g.SegmentData()
	for _, c := range []struct{ whole, away bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
		whole, away := c.whole, c.away
		r := newRig(t, g, size, rigOptions{crashable: true})
		a, b := testutil.Pattern(int(size), 1), testutil.Pattern(int(size), 2)
		r.devs[1].SetDown(whole) // the new slot cannot be cleared (clearSlot)
		mustWriteFlushed(t, r.vol, a, 0)
		r.devs[1].SetDown(true)
		mustWriteFlushed(t, r.vol, b, 0)
		r.devs[1].SetDown(false)
		if _, err := r.vol.Reinstate(ctx, r.names[1]); err != nil {
			t.Fatal(err)
		}
		marks, _ := r.stale.Stale(ctx)
		if len(marks) != 1 || (marks[0].Stripes == nil) != whole {
			t.Fatalf("whole %v: marks before repair %+v, want one for the slot, by stripe unless whole", whole, marks)
		}
		if n, err := r.vol.Repair(ctx); err != nil || n == 0 {
			t.Fatalf("repair: %d stripes, %v", n, err)
		}
		if marks, _ := r.stale.Stale(ctx); len(marks) != 0 {
			t.Fatalf("marks left after repair: %v", marks)
		}
		devs := r.crash(t, ctx, nil)
		r.reopen(t, devs)
		r.rebindMems(devs)
		got := make([]byte, size)
		if !away {
			if err := r.vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, b) {
				t.Fatalf("whole %v: after repair and a crash: err %v, data matches %v", whole, err, bytes.Equal(got, b))
			}
			if st := r.vol.ChecksumStats(); st != (ChecksumStats{}) {
				t.Fatalf("whole %v: after repair and a crash: %+v, want no mismatch (the rebuilt blocks' checksums were not durable)", whole, st)
			}
			continue
		}
		dm := DeviceMap{}
		for i, n := range r.names {
			d := faultdev.New(devs[n].(*blockdev.Mem), int64(i))
			d.SetDown(i == 0 || i == 2)
			dm[n] = d
		}
		r.reopen(t, dm)
		if err := r.vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("whole %v: after repair and a crash, with two other namespaces away: err %v, data matches %v", whole, err, bytes.Equal(got, b))
		}
	}
}

// TestMoveDurableBeforeCommit: a move (here a rebuild of a lost shard
// elsewhere) commits the new placement only once the destination's data
// and checksums are flushed. The owner and the devices crash right after
// it, before any Flush; a new owner with two other namespaces away reads
// everything back, with no block failing its checksum.
func TestMoveDurableBeforeCommit(t *testing.T) {
	ctx := context.Background()
	for _, g := range []layout.Geometry{csumLayouts[1], csumLayouts[3]} {
		r := newRig(t, g, g.SegmentData(), rigOptions{namespaces: g.N() + 1, slots: 2, crashable: true})
		want := testutil.Pattern(int(r.vol.Size()), 4)
		mustWriteFlushed(t, r.vol, want, 0)
		old, _, _ := r.alloc.Lookup(ctx, 0)
		r.devs[r.index(old[3].NS)].SetDown(true) // the shard to rebuild is gone
		to := SlotRef{NS: r.names[g.N()], Slot: 0}
		if err := r.alloc.Reserve(to); err != nil {
			t.Fatal(err)
		}
		err := r.vol.MoveSlot(ctx, 0, 3, to, MoveOptions{Commit: func(ctx context.Context) error { return r.alloc.Replace(ctx, 0, 3, to) }})
		if err != nil {
			t.Fatal(err)
		}
		dm := DeviceMap{}
		for i, m := range r.mems {
			d := faultdev.New(m.CrashClone(), int64(i))
			d.SetDown(r.names[i] == old[0].NS || r.names[i] == old[1].NS)
			dm[r.names[i]] = d
		}
		r.reopen(t, dm)
		mustEqual(t, g.String()+": after the move, a crash and two other namespaces going", mustRead(t, r.vol, 0, len(want)), want)
		if st := r.vol.ChecksumStats(); st != (ChecksumStats{}) {
			t.Fatalf("%v: after the move and a crash: %+v, want no mismatch", g, st)
		}
	}
}
