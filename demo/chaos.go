package demo

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strings"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/placement"
)

// chaos shows a storage host dying under a served volume: it writes test
// data, stops a target holding shards, reads everything back degraded, marks
// the namespace failed (as an owner seeing IO errors does), rebuilds the lost
// shards with progress, and verifies the data and the restored redundancy.
func (d *demo) chaos(ctx context.Context) error {
	out := d.o.Out
	n := min(d.o.Size/2, 256<<20)
	data := make([]byte, n)
	rand.New(rand.NewSource(1)).Read(data)
	fmt.Fprintf(out, "chaos: writing %d MiB of test data\n", n>>20)
	if err := d.counted.WriteAt(ctx, data, 0); err != nil {
		return err
	}
	victim, err := d.victim(ctx)
	if err != nil {
		return err
	}
	t := d.targets[victim]
	t.stop()
	fmt.Fprintf(out, "chaos: stopped target %d (%s, %s): its shards are gone\n", victim+1, t.host, t.addr())
	before := d.degraded.Load()
	if err := d.verify(ctx, data); err != nil {
		return fmt.Errorf("degraded read: %w", err)
	}
	fmt.Fprintf(out, "chaos: read %d MiB back while degraded: identical (%d stripes reconstructed)\n", n>>20, d.degraded.Load()-before)
	ns := t.host + "-n1"
	if err := d.store.SetNamespaceState(ctx, ns, placement.StateFailed); err != nil {
		return err
	}
	fmt.Fprintf(out, "chaos: namespace %s marked failed; rebuilding its shards elsewhere\n", ns)
	if err := d.rebuild(ctx); err != nil {
		return err
	}
	if err := d.verify(ctx, data); err != nil {
		return fmt.Errorf("after rebuild: %w", err)
	}
	fmt.Fprintf(out, "chaos: redundancy restored: every segment has %d shards on %d distinct hosts; data verified\n", d.o.K+d.o.M, d.o.K+d.o.M)
	return nil
}

// victim returns the index of a target that holds a shard of the volume.
func (d *demo) victim(ctx context.Context) (int, error) {
	segs, _, err := d.mapped.Map.Segments(ctx)
	if err != nil {
		return 0, err
	}
	for _, rec := range segs {
		for i, t := range d.targets {
			if strings.HasPrefix(rec.Slots[0].NS, t.host+"-") {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("no allocated segment")
}

func (d *demo) verify(ctx context.Context, want []byte) error {
	got := make([]byte, len(want))
	if err := d.counted.ReadAt(ctx, got, 0); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("data differs from what was written")
	}
	return nil
}

// rebuild moves the lost shards and prints a progress line per shard.
func (d *demo) rebuild(ctx context.Context) error {
	lost, err := d.mapped.LostShards(ctx, d.store)
	if err != nil {
		return err
	}
	moved := 0
	n, err := d.mapped.Rebuild(ctx, d.store, 2, func(p agent.MoveProgress) {
		if !p.Finished {
			return
		}
		moved++
		fmt.Fprintf(d.o.Out, "rebuild: [%-20s] %d/%d shards (segment %d shard %d: %s slot %d -> %s slot %d)\n",
			strings.Repeat("#", 20*moved/len(lost)), moved, len(lost), p.Segment, p.Shard, p.From.NS, p.From.Slot, p.To.NS, p.To.Slot)
	})
	if err != nil {
		return fmt.Errorf("rebuild: %d of %d shards: %w", n, len(lost), err)
	}
	return nil
}
