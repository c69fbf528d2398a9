package volume

import (
	"context"
	"errors"
	"testing"
)

// A write whose context ended before it took the stripe lock writes
// nothing, even a whole stripe (whose plan reads nothing first): its caller
// may have sent it again elsewhere and written newer data since.
func TestWriteCancelledBeforeLock(t *testing.T) {
	r := newRig(t, g42, g42.SegmentData(), rigOptions{})
	stripe := int(int64(g42.K) * g42.Chunk)
	first := pattern(stripe, 1)
	if err := r.vol.WriteAt(t.Context(), first, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.vol.WriteAt(ctx, pattern(stripe, 2), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("write with a cancelled context: %v, want context.Canceled", err)
	}
	mustEqual(t, "stripe 0 after the cancelled write", mustRead(t, r.vol, 0, stripe), first)
}
