package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/devtest"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

var errFull = blockdev.Mark(errors.New("pwrite: no space left on device"), blockdev.ErrNoSpace)

// TestNoSpaceKeepsFlushedData: the namespaces of one or two of three shards
// (2+1) run out of space (every write to them fails with ErrNoSpace) after
// the volume was written and flushed. Writes go on: they succeed while a
// stripe can be written within M, and otherwise fail with ErrNoSpace. The
// flushed data and every acknowledged write stay readable, during and after
// (a new owner included), the stale marks name only stripes that were
// written while space lacked, no namespace is treated as down, and once
// space is back Repair clears every mark and restores full redundancy.
// Volume formats 1 (plain), 2 (checksums) and 3 (checksums, write log).
func TestNoSpaceKeepsFlushedData(t *testing.T) {
	for format, f := range [][2]bool{{false, false}, {true, false}, {true, true}} {
		g := layout.Geometry{K: 2, M: 1, Chunk: 16 << 10, SlotSize: 256 << 10, Checksums: f[0], Log: f[1]}
		for _, full := range []int{1, 2} {
			t.Run(fmt.Sprintf("%d full/format %d", full, format+1), func(t *testing.T) {
				noSpaceRun(t, g, full)
			})
		}
	}
}

func noSpaceRun(t *testing.T, g layout.Geometry, full int) {
	ctx := context.Background()
	size := 4 * g.SegmentData()
	r := newRig(t, g, size, rigOptions{})
	model := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(model)
	mustWriteFlushed(t, r.vol, model, 0)
	// Without checksums the failed writes tear (write a part, as a file
	// system that fills mid-write does); with them a torn block would read
	// as corrupt, not as old or new data, so they write nothing.
	action := faultdev.Tear
	if g.Checksums {
		action = faultdev.Fail
	}
	for i := range full {
		r.devs[i].Add(faultdev.Rule{Action: action, Ops: faultdev.OpWrite | faultdev.OpWriteZeroes, Err: errFull})
	}
	// Writes of every shape over the first half: whole stripes, pieces of
	// a chunk, spans over two stripes. A failed write leaves each of its
	// blocks old or new (undef lists what a block may read as).
	undef := map[int64][][]byte{}
	rng := rand.New(rand.NewSource(2))
	wrote, failed := 0, 0
	for n := 0; n < 60; n++ {
		blocks := []int{1, 3, 4, 8, 12}[rng.Intn(5)]
		off := int64(rng.Intn(int(size/2)/4096-blocks)) * 4096
		p := make([]byte, blocks*4096)
		rng.Read(p)
		err := r.vol.WriteAt(ctx, p, off)
		switch {
		case err == nil:
			wrote++
			copy(model[off:], p)
			for b := off; b < off+int64(len(p)); b += 4096 {
				delete(undef, b)
			}
		case errors.Is(err, blockdev.ErrNoSpace):
			failed++
			for b := off; b < off+int64(len(p)); b += 4096 {
				if _, ok := undef[b]; !ok {
					undef[b] = [][]byte{bytes.Clone(model[b : b+4096])}
				}
				undef[b] = append(undef[b], bytes.Clone(p[b-off:b-off+4096]))
			}
		default:
			t.Fatalf("write %d+%d with %d namespaces full: %v, want success or ErrNoSpace", off, len(p), full, err)
		}
	}
	if wrote == 0 || failed == 0 {
		t.Fatal("with namespaces full every write failed, or none: the test cannot tell")
	}
	t.Logf("%d writes done, %d failed for lack of space", wrote, failed)
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatalf("flush with full namespaces: %v", err)
	}
	if down := r.vol.DownNamespaces(); len(down) != 0 {
		t.Fatalf("namespaces treated as down for lack of space: %v", down)
	}
	devtest.CheckContent(t, r.vol, model, undef, "with full namespaces")
	checkMarks(t, r, g, size/2)

	// A new owner after a crash (nothing closed, every written segment
	// still dirty) resyncs them while space still lacks.
	r.reopen(t, r.deviceMap())
	if _, err := r.vol.Recover(ctx); err != nil {
		t.Fatalf("recover with full namespaces: %v", err)
	}
	devtest.CheckContent(t, r.vol, model, undef, "a new owner, full namespaces")

	if full == 2 {
		// Space back on one of the two: Repair rebuilds everything but
		// the stripes of the one still full, and says why it stopped.
		r.devs[1].Clear()
		if _, err := r.vol.Repair(ctx); !errors.Is(err, blockdev.ErrNoSpace) {
			t.Fatalf("repair with one namespace still full: %v, want ErrNoSpace", err)
		}
		marks, err := r.stale.Stale(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range marks {
			if m.Ref.NS != r.names[0] {
				t.Fatalf("after a repair with only %s full, a mark on %s is left: %+v", r.names[0], m.Ref.NS, m)
			}
		}
		devtest.CheckContent(t, r.vol, model, undef, "repaired but for one full namespace")
	}
	for i := range full {
		r.devs[i].Clear()
	}
	if _, err := r.vol.Repair(ctx); err != nil {
		t.Fatalf("repair once space is back: %v", err)
	}
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if marks, _ := r.stale.Stale(ctx); len(marks) != 0 {
		t.Fatalf("marks left after repair: %+v", marks)
	}
	devtest.CheckContent(t, r.vol, model, undef, "after repair")
	// Settle the blocks of failed writes to what the volume reads, then
	// lose each namespace in turn: reads reconstruct the same bytes.
	settled := bytes.Clone(model)
	if err := r.vol.ReadAt(ctx, settled, 0); err != nil {
		t.Fatal(err)
	}
	r.checkParity(t)
	for i := range r.devs {
		r.devs[i].SetDown(true)
		r.reopen(t, r.deviceMap())
		got := make([]byte, size)
		if err := r.vol.ReadAt(ctx, got, 0); err != nil {
			t.Fatalf("after repair, namespace %d down: %v", i, err)
		}
		mustEqual(t, fmt.Sprintf("after repair, namespace %d down", i), got, settled)
		r.devs[i].SetDown(false)
	}
	r.reopen(t, r.deviceMap())
	if err := r.vol.WriteAt(ctx, make([]byte, g.StripeData()), 0); err != nil {
		t.Fatalf("write after space is back: %v", err)
	}
}

// checkMarks checks that every stale mark names stripes, not a whole slot,
// and only stripes of segments below written (where the writes went).
func checkMarks(t *testing.T, r *rig, g layout.Geometry, written int64) {
	t.Helper()
	marks, err := r.stale.Stale(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) == 0 {
		t.Fatal("no stale marks: the stripes that missed writes are not recorded")
	}
	for _, m := range marks {
		if m.Stripes == nil {
			t.Fatalf("mark %+v covers the whole slot; only stripes written without space are stale", m)
		}
		if m.Segment*g.SegmentData() >= written {
			t.Fatalf("mark %+v in a segment no write reached", m)
		}
	}
}

// TestStripeRanges: adding and removing stripes keeps the list sorted,
// disjoint and non-adjacent, and a list over the cap merges the closest
// ranges, covering every stripe it had.
func TestStripeRanges(t *testing.T) {
	var rs stripeRanges
	for _, s := range []int64{5, 3, 4, 9, 0, 4} {
		rs = rs.with(s)
	}
	if got := rs.String(); got != "0-0,3-5,9-9" {
		t.Fatalf("after adding: %s", got)
	}
	if !rs.has(4) || rs.has(6) || !rs.has(9) || rs.has(10) {
		t.Fatalf("has is wrong on %s", rs)
	}
	rs = rs.without(4).without(9).without(7)
	if got := rs.String(); got != "0-0,3-3,5-5" || !validRanges(rs, 6) || validRanges(rs, 5) {
		t.Fatalf("after removing: %s", got)
	}
	if rs.without(0).without(3).without(5) != nil {
		t.Fatal("removing every stripe left a list")
	}
	var many stripeRanges
	for s := int64(0); s < 3*maxHoleRanges; s += 3 {
		many = many.with(s)
	}
	many = many.with(1) // the gap 0..3 is now the smallest
	if len(many) > maxHoleRanges || !validRanges(many, 3*maxHoleRanges) {
		t.Fatalf("%d ranges over the cap of %d", len(many), maxHoleRanges)
	}
	for s := int64(0); s < 3*maxHoleRanges; s += 3 {
		if !many.has(s) {
			t.Fatalf("merging lost stripe %d", s)
		}
	}
}
