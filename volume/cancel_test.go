package volume

import (
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// A write whose context ended before it took the stripe lock writes
// nothing, even a whole stripe (whose plan reads nothing first): its caller
// may have sent it again elsewhere and written newer data since.
func TestWriteCancelledBeforeLock(t *testing.T) {
	r := newRig(t, g42, g42.SegmentData(), rigOptions{})
	stripe := int(int64(g42.K) * g42.Chunk)
	first := testutil.Pattern(stripe, 1)
	if err := r.vol.WriteAt(t.Context(), first, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.vol.WriteAt(ctx, testutil.Pattern(stripe, 2), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("write with a cancelled context: %v, want context.Canceled", err)
	}
	mustEqual(t, "stripe 0 after the cancelled write", mustRead(t, r.vol, 0, stripe), first)
}

// The same for a trim or zeroing of whole stripes (zeroStripes).
func TestTrimCancelledBeforeLock(t *testing.T) {
	r := newRig(t, g42, g42.SegmentData(), rigOptions{})
	stripe := int(int64(g42.K) * g42.Chunk)
	first := testutil.Pattern(2*stripe, 1)
	if err := r.vol.WriteAt(t.Context(), first, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for name, zero := range map[string]func(context.Context, int64, int64) error{"trim": r.vol.Trim, "write-zeroes": r.vol.WriteZeroes} {
		if err := zero(ctx, 0, int64(2*stripe)); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
		mustEqual(t, "stripes 0-1 after the cancelled "+name, mustRead(t, r.vol, 0, 2*stripe), first)
	}
}
