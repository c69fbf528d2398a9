package volume

import (
	"bytes"
	"context"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestFencedShardFailsRequest: when one namespace refuses writes as fenced
// (the storage says a newer owner took the volume), writes and flushes fail
// with ErrFenced instead of being completed around it: the namespace is not
// marked down and no slot is marked stale (a stale owner must not touch the
// volume's records). Reads still work (fencing refuses writes only).
func TestFencedShardFailsRequest(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, Chunk: 64 << 10, SlotSize: 1 << 20}
	const size = 4 << 20
	r := newRig(t, g, size, rigOptions{})
	old := bytes.Repeat([]byte{0xa5}, size)
	mustWriteFlushed(t, r.vol, old, 0)
	r.devs[0].Add(faultdev.Rule{Action: faultdev.Fail, Ops: faultdev.OpWrite | faultdev.OpFlush | faultdev.OpWriteZeroes | faultdev.OpTrim,
		Err: blockdev.ErrFenced})
	next := bytes.Repeat([]byte{0x5a}, size)
	if err := r.vol.WriteAt(ctx, next, 0); blockdev.Class(err) != blockdev.ErrFenced {
		t.Fatalf("a write reaching a fenced namespace: %v, want ErrFenced", err)
	}
	if err := r.vol.WriteAt(ctx, next[:4096], 4096); blockdev.Class(err) != blockdev.ErrFenced {
		t.Fatalf("a partial-stripe write reaching a fenced namespace: %v, want ErrFenced", err)
	}
	if down := r.vol.DownNamespaces(); len(down) != 0 {
		t.Errorf("namespaces marked down after a fenced write: %v", down)
	}
	stale, err := r.stale.Stale(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != 0 {
		t.Errorf("slots marked stale after a fenced write: %v", stale)
	}
	got := make([]byte, 4096)
	if err := r.vol.ReadAt(ctx, got, 8<<10); err != nil {
		t.Fatalf("read after fenced writes: %v", err)
	}
}
