package volume

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestGrow: past the end is out of range until Grow; then a write there (a
// new segment) reads back and the old data stays; shrinking and odd sizes
// are refused.
func TestGrow(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, Chunk: 64 << 10, SlotSize: 1 << 20}
	seg := g.SegmentData()
	r := newRig(t, g, seg, rigOptions{slots: 4})
	old, tail := testutil.Pattern(4096, 1), testutil.Pattern(4096, 2)
	if err := r.vol.WriteAt(ctx, old, seg-4096); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.WriteAt(ctx, tail, seg); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past the end before Grow: %v, want ErrOutOfRange", err)
	}
	if err := r.vol.Grow(2 * seg); err != nil {
		t.Fatal(err)
	}
	if r.vol.Size() != 2*seg {
		t.Fatalf("size %d after Grow(%d)", r.vol.Size(), 2*seg)
	}
	if err := r.vol.WriteAt(ctx, tail, seg); err != nil {
		t.Fatalf("write past the old end after Grow: %v", err)
	}
	got := make([]byte, 8192)
	if err := r.vol.ReadAt(ctx, got, seg-4096); err != nil || !bytes.Equal(got, append(old, tail...)) {
		t.Fatalf("read across the old end: %v, data equal %v", err, bytes.Equal(got, append(old, tail...)))
	}
	for _, bad := range []int64{seg, 2*seg + 512} {
		if err := r.vol.Grow(bad); !errors.Is(err, blockdev.ErrInvalid) {
			t.Errorf("Grow(%d) from %d: %v, want ErrInvalid", bad, 2*seg, err)
		}
	}
}
