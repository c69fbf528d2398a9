package volume

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestReinstate: a namespace that was down comes back within one open. Its
// slots that missed writes are rebuilt by Repair, after which the data
// survives two other namespaces going, and the stale marks are gone.
func TestReinstate(t *testing.T) {
	r := newRig(t, g42, 2*g42.SegmentData(), rigOptions{})
	ctx := context.Background()
	data := testutil.Pattern(int(r.vol.Size()), 1)
	mustWriteFlushed(t, r.vol, data, 0)
	r.devs[1].SetDown(true)
	patch := testutil.Pattern(int(g42.SegmentData()), 2)
	copy(data[g42.Chunk:], patch)
	if err := r.vol.WriteAt(ctx, patch, g42.Chunk); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.vol.DownNamespaces(); !slices.Equal(got, []string{"ns01"}) {
		t.Fatalf("down namespaces %v, want [ns01]", got)
	}
	r.devs[1].SetDown(false)
	if ok, err := r.vol.Reinstate(ctx, "ns01"); !ok || err != nil {
		t.Fatalf("reinstate: %v, %v", ok, err)
	}
	if ok, _ := r.vol.Reinstate(ctx, "ns01"); ok {
		t.Fatal("reinstate of a namespace that is up reported it down")
	}
	if n, err := r.vol.Repair(ctx); err != nil || n == 0 {
		t.Fatalf("repair: %d stripes, %v", n, err)
	}
	if marks, _ := r.stale.Stale(ctx); len(marks) != 0 {
		t.Fatalf("stale marks left after repair: %v", marks)
	}
	r.checkParity(t)
	r.devs[0].SetDown(true)
	r.devs[2].SetDown(true)
	mustEqual(t, "after reinstate and repair, two others down", mustRead(t, r.vol, 0, len(data)), data)
}

// TestReinstateDistrustsUnflushed: a namespace goes down holding writes it
// acknowledged but never flushed, and comes back without them (a target
// restart lost its write cache). Nothing it held may be read as current:
// with two other namespaces down, a read must fail (three shards missing)
// rather than serve the old contents it came back with; after Repair, the
// last writes survive two other namespaces going.
func TestReinstateDistrustsUnflushed(t *testing.T) {
	r := newRig(t, g42, 2*g42.SegmentData(), rigOptions{})
	ctx := context.Background()
	old := testutil.Pattern(int(r.vol.Size()), 1)
	mustWriteFlushed(t, r.vol, old, 0)
	image := make([]byte, r.mems[1].Size())
	if err := r.mems[1].ReadAt(ctx, image, 0); err != nil {
		t.Fatal(err)
	}
	data := testutil.Pattern(len(old), 2)
	if err := r.vol.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	r.devs[1].SetDown(true)
	mustRead(t, r.vol, 0, len(data)) // a read notices it down
	if err := r.mems[1].WriteAt(ctx, image, 0); err != nil {
		t.Fatal(err) // it comes back with what it had at the last flush
	}
	r.devs[1].SetDown(false)
	if ok, err := r.vol.Reinstate(ctx, "ns01"); !ok || err != nil {
		t.Fatalf("reinstate: %v, %v", ok, err)
	}
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err) // the others' writes are durable: they are trusted when they return
	}
	r.devs[0].SetDown(true)
	r.devs[2].SetDown(true)
	got := make([]byte, len(data))
	err := r.vol.ReadAt(ctx, got, 0)
	var se *StripeError
	if !errors.As(err, &se) {
		t.Fatalf("read before repair with two others down: %v (data matches: %v), want a StripeError", err, bytes.Equal(got, data))
	}
	r.devs[0].SetDown(false)
	r.devs[2].SetDown(false)
	for _, ns := range []string{"ns00", "ns02"} {
		r.vol.Reinstate(ctx, ns)
	}
	if _, err := r.vol.Repair(ctx); err != nil {
		t.Fatal(err)
	}
	r.checkParity(t)
	r.devs[3].SetDown(true)
	r.devs[4].SetDown(true)
	mustEqual(t, "after repair, two others down", mustRead(t, r.vol, 0, len(data)), data)
}
