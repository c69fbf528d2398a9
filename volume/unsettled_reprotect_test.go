package volume

import (
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
)

// TestUnsettledRowKeepsItsNeighbours: a crash mid-write plus the loss of a
// namespace leaves blocks unsettled. The other blocks of their rows hold
// acknowledged data, and must survive what parity covers: the loss of
// another namespace of the row, once the first lost slots are rebuilt.
// Before, the recovery left the row's parity for a version of the row that
// was gone (poisoned), so the rebuild of the second namespace's slots wrote
// those blocks blank: acknowledged data lost, reads failing for good (the
// compound fault campaign's "acknowledged block reads EIO"). Now the
// recovery encodes the row's parity again with the unsettled block as
// zeros, marked so, and rebuilds use it; the unsettled block itself still
// reads as corrupt, also to an owner that lost the record of unsettled
// blocks and scrubs the volume: the marked parity never rebuilds it.
func TestUnsettledRowKeepsItsNeighbours(t *testing.T) {
	ctx := context.Background()
	fds := map[string]*faultdev.Dev{}
	h := unsettledHoleOn(t, unsettledLayout, func(devs DeviceMap) DeviceMap {
		out := DeviceMap{}
		for n, d := range devs {
			fds[n] = faultdev.New(d, 0)
			out[n] = fds[n]
		}
		return out
	})
	r := h.r
	want := unsettledOffsets(r.vol)
	moveLost(t, h)
	checkUnsettled(t, h, want, "after rebuilding the lost slots")

	// Lose the namespace of another data shard of an unsettled row.
	b := r.vol.Unsettled()[0]
	refs, _, err := r.alloc.Lookup(ctx, b.Segment)
	if err != nil {
		t.Fatal(err)
	}
	next := refs[r.g.SlotOf(b.Stripe, (b.Shard+1)%r.g.K)].NS
	fds[next].SetDown(true)
	moveAllFrom(t, r, next)
	if got := unsettledOffsets(r.vol); len(got) != len(want) {
		t.Errorf("rebuilding %s's slots left %d blocks unsettled, want the %d the crash left", next, len(got), len(want))
	}
	checkUnsettled(t, h, want, "after losing "+next+" too and rebuilding its slots")
	newOwner(t, h)
	checkUnsettled(t, h, want, "after a new owner's recovery")

	// An owner without the record: the unsettled blocks are blank, and
	// the marked parity must not make them zeros, by recovery or scrub.
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r.unsettled = NewMemUnsettledLog()
	newOwner(t, h)
	if _, err := r.vol.Scrub(ctx, 0, r.g.Segments(r.vol.Size())-1, nil); err != nil && !errors.Is(err, blockdev.ErrCorrupt) {
		t.Fatalf("scrub without the record: %v", err)
	}
	got := make([]byte, 4096)
	for off := range want {
		if err := r.vol.ReadAt(ctx, got, off); !errors.Is(err, blockdev.ErrCorrupt) {
			t.Fatalf("unsettled block at %d, its record lost: read %x... (%v), want class ErrCorrupt", off, got[:8], err)
		}
	}
}
