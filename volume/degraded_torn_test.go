package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestDegradedWriteThenTornRow: on 4+2 with the write log, the namespace
// of data shard 0 goes down and block 1 of that shard takes a write
// (acknowledged; it lives in parity alone), without a flush after it but
// with the devices keeping everything, as when the owner process dies and
// the targets live on; then a write across shards 1 and 2 of the same row
// is torn by the crash (after tear device writes, each unflushed block kept
// or lost as seed picks) and the owner recovers with shard 0 still down.
// The record of the torn write's epoch has no partial parity for block 1
// (written in the epoch), and with the parities on different versions
// there are more unknowns than parity rows: the block was poisoned (read
// as corrupt) in 22 of the 192 unflushed cases before writes around a
// missing data shard flushed before their acknowledgement (flushAround).
// Campaign seed 32008 met it over real processes.
func TestDegradedWriteThenTornRow(t *testing.T) {
	ctx := context.Background()
	g := pplLayouts[1] // 4+2, 16 KiB chunks
	for _, pat := range []struct {
		name string
		f    func(n int, seed byte) []byte
	}{{"add", addPattern}, {"xor", testutil.Pattern}} {
		for _, flushX := range []bool{true, false} {
			for tear := 0; tear < 12; tear++ {
				for seed := int64(0); seed < 8; seed++ {
					t.Run(fmt.Sprintf("%s/flush%v/tear%d/seed%d", pat.name, flushX, tear, seed), func(t *testing.T) {
						r := newRig(t, g, 2*g.SegmentData(), rigOptions{crashable: true})
						mustWriteFlushed(t, r.vol, pat.f(int(g.StripeData()), 1), 0)
						cp := &crashPoint{at: 1 << 30, rng: rand.New(rand.NewSource(seed)), mems: DeviceMap{}, names: r.names}
						for i, m := range r.mems {
							cp.mems[r.names[i]] = m
						}
						r.reopen(t, cp.wrap())
						if _, err := r.vol.Recover(ctx); err != nil {
							t.Fatal(err)
						}
						x := r.index(shardNS(t, r, 0))
						r.mems[x].SetUnavailable(true)
						row := int64(1)
						xv := pat.f(4096, 2)
						if flushX {
							mustWriteFlushed(t, r.vol, xv, row*4096) // degraded, flushed
						} else {
							if err := r.vol.WriteAt(ctx, xv, row*4096); err != nil { // degraded, acknowledged
								t.Fatal(err)
							}
							for _, m := range r.mems { // a process crash: the devices keep what they took
								m.Flush(ctx)
							}
						}
						cp.mu.Lock()
						cp.at = cp.n + tear
						cp.mu.Unlock()
						torn := pat.f(int(g.Chunk+4096), 3)
						if err := r.vol.WriteAt(ctx, torn, g.Chunk+row*4096); err != nil {
							t.Fatal(err)
						}
						crashed := cp.snapshot()
						crashed[r.names[x]].(*blockdev.Mem).SetUnavailable(true)
						if err := r.dirty.MarkDirty(ctx, 0); err != nil {
							t.Fatal(err)
						}
						r.reopen(t, crashed)
						if _, err := r.vol.Recover(ctx); err != nil && !errors.As(err, new(*UnsettledError)) {
							t.Fatalf("recover: %v", err)
						}
						got := make([]byte, 4096)
						if err := r.vol.ReadAt(ctx, got, row*4096); err != nil {
							t.Fatalf("the acknowledged write around the down shard reads: %v", err)
						}
						if !bytes.Equal(got, xv) {
							t.Fatalf("the acknowledged write around the down shard reads other bytes")
						}
					})
				}
			}
		}
	}
}
