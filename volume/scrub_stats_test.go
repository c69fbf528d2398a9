package volume

import (
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestScrubCountsOnlyItsOwn: while a scrub checks segment 0 (two bad
// blocks, healable, one of them parity), reads of a row of segment 1 with both data blocks bad
// run before each of its stripes and find them every time. The volume's
// counters count every find; Scrub returns what it read itself: two blocks
// bad, both healed, one parity chunk rewritten. A scrub of segment 1 then finds the row: two bad, two
// left bad.
func TestScrubCountsOnlyItsOwn(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, Chunk: 8 << 10, SlotSize: 32 << 10, Checksums: true}
	size := 2 * g.SegmentData()
	r := newRig(t, g, size, rigOptions{crashable: true})
	if err := r.vol.WriteAt(ctx, testutil.Pattern(int(size), 3), 0); err != nil {
		t.Fatal(err)
	}
	for _, k := range []flipKey{{0, 0, 0, 1}, {0, 1, 2, 0}, {1, 0, 0, 0}, {1, 0, 1, 0}} {
		flipBitT(t, r, k, 77)
	}
	restart(t, r)
	reads := 0
	readBadRow := func(ctx context.Context, n int64) error {
		b := make([]byte, 4096)
		if err := r.vol.ReadAt(ctx, b, g.SegmentData()); !errors.Is(err, blockdev.ErrCorrupt) {
			t.Fatalf("read of a row with both data blocks bad: %v, want class ErrCorrupt", err)
		}
		reads++
		return nil
	}
	st, err := r.vol.Scrub(ctx, 0, 0, readBadRow)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ScrubStats{Stripes: g.StripesPerSegment(), Found: 2, Healed: 2, Parity: 1}); st != want {
		t.Fatalf("scrub of segment 0: %+v, want %+v", st, want)
	}
	if all := r.vol.ChecksumStats(); all.Mismatches != 2+2*int64(reads) || all.Unhealed != 2*int64(reads) {
		t.Fatalf("volume counters %+v after %d reads of the bad row: want every find counted", all, reads)
	}
	st, err = r.vol.Scrub(ctx, 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ScrubStats{Stripes: g.StripesPerSegment(), Found: 2, Unhealed: 2}); st != want {
		t.Fatalf("scrub of segment 1: %+v, want %+v", st, want)
	}
}
