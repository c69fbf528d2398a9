package volume

import (
	"bytes"
	"context"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// deviceMap is the rig's namespaces by name.
func (r *rig) deviceMap() DeviceMap {
	dm := DeviceMap{}
	for i, d := range r.devs {
		dm[r.names[i]] = d
	}
	return dm
}

// TestReopenAfterMissedWrites: a namespace is down while the volume is
// overwritten and flushed, then comes back; a new owner opens the volume.
// Its reads must return the last writes, not the old data the namespace
// still holds; Repair rebuilds the slots and clears their marks, after which
// two other namespaces may go and the data still reads back.
func TestReopenAfterMissedWrites(t *testing.T) {
	ctx := context.Background()
	size := 2 * g42.SegmentData()
	for _, useLog := range []bool{true, false} {
		r := newRig(t, g42, size, rigOptions{})
		if !useLog {
			r.stale = nopStaleLog{} // shows that the test can fail
		}
		if !useLog {
			r.reopen(t, r.deviceMap())
		}
		a, b := make([]byte, size), make([]byte, size)
		rand.New(rand.NewSource(1)).Read(a)
		rand.New(rand.NewSource(2)).Read(b)
		if err := r.vol.WriteAt(ctx, a, 0); err != nil {
			t.Fatal(err)
		}
		r.devs[2].SetDown(true)
		mustWriteFlushed(t, r.vol, b, 0)
		r.devs[2].SetDown(false)
		r.reopen(t, r.deviceMap())
		got := make([]byte, size)
		if err := r.vol.ReadAt(ctx, got, 0); err != nil {
			t.Fatal(err)
		}
		if !useLog {
			if bytes.Equal(got, b) {
				t.Fatal("without a stale log the reopened volume read no old data: the test cannot tell")
			}
			continue
		}
		if !bytes.Equal(got, b) {
			t.Fatal("reopened volume returned old data from the namespace that missed the writes")
		}
		if marks, _ := r.stale.Stale(ctx); len(marks) == 0 {
			t.Fatal("no stale marks recorded")
		}
		if n, err := r.vol.Repair(ctx); err != nil || n == 0 {
			t.Fatalf("repair: %d stripes, %v", n, err)
		}
		if marks, _ := r.stale.Stale(ctx); len(marks) != 0 {
			t.Fatalf("marks left after repair: %v", marks)
		}
		r.devs[0].SetDown(true)
		r.devs[4].SetDown(true)
		r.reopen(t, r.deviceMap())
		if err := r.vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("after repair, with two other namespaces down: err %v, data matches %v", err, bytes.Equal(got, b))
		}
	}
}

// TestStaleMarkFailureFailsWrite: when the mark cannot be recorded, the
// write that went around the slot is not acknowledged.
func TestStaleMarkFailureFailsWrite(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, g42, g42.SegmentData(), rigOptions{})
	r.vol.stale = failingStaleLog{}
	if err := r.vol.WriteAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	r.devs[0].SetDown(true)
	r.devs[1].SetDown(true)
	err := r.vol.WriteAt(ctx, make([]byte, g42.SegmentData()), 0)
	if err == nil {
		t.Fatal("a write that missed two slots was acknowledged although their marks failed")
	}
}

type failingStaleLog struct{ nopStaleLog }

func (failingStaleLog) MarkStale(context.Context, StaleSlot) error { return errMarkFailed }

var errMarkFailed = bytes.ErrTooLarge

// TestRecoverWithStaleSlot: the owner stops uncleanly (segments left dirty)
// after writes that went around a down namespace, which then comes back. The
// next open's Recover cannot resync a segment whose data slot is stale: it
// leaves it dirty instead of failing the open, reads return the last writes,
// and after Repair a second Recover resyncs and cleans it.
func TestRecoverWithStaleSlot(t *testing.T) {
	ctx := context.Background()
	size := g42.SegmentData()
	r := newRig(t, g42, size, rigOptions{})
	a, b := make([]byte, size), make([]byte, size)
	rand.New(rand.NewSource(3)).Read(a)
	rand.New(rand.NewSource(4)).Read(b)
	if err := r.vol.WriteAt(ctx, a, 0); err != nil {
		t.Fatal(err)
	}
	r.devs[1].SetDown(true)
	if err := r.vol.WriteAt(ctx, b, 0); err != nil {
		t.Fatal(err)
	}
	r.devs[1].SetDown(false)
	r.reopen(t, r.deviceMap()) // no Clean: an unclean stop
	if n, err := r.vol.Recover(ctx); err != nil || n != 0 {
		t.Fatalf("recover with a stale data slot: %d resynced, %v; want 0, nil", n, err)
	}
	if d, _ := r.dirty.Dirty(ctx); len(d) != 1 {
		t.Fatalf("dirty after a deferred resync: %v", d)
	}
	got := make([]byte, size)
	if err := r.vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("read after recover: err %v, matches last write %v", err, bytes.Equal(got, b))
	}
	if _, err := r.vol.Repair(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := r.vol.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("recover after repair: %d, %v; want 1, nil", n, err)
	}
	r.checkParity(t)
}

// readStripes reads stripes [from, to) of segment 0 of r's volume and
// compares them with want (the whole segment's expected content).
func readStripes(t *testing.T, r *rig, want []byte, from, to int64) error {
	t.Helper()
	n := r.g.StripeData()
	got := make([]byte, (to-from)*n)
	if err := r.vol.ReadAt(context.Background(), got, from*n); err != nil {
		return err
	}
	if !bytes.Equal(got, want[from*n:to*n]) {
		t.Fatalf("stripes %d to %d: wrong data", from, to-1)
	}
	return nil
}

// TestShortOutagesMarkByStripe: two namespaces are cut off while one
// stripe is written, and the flush after finds them gone; once they are
// back a third namespace is lost. Only the stripe written during the
// outage lost a third shard: the others must still read, in this owner and
// in a new one that reads the stale log, and Repair must make the stripe
// whole once the third namespace is back. Marking each skipped or lost
// namespace's whole slot stale left every stripe three shards short.
func TestShortOutagesMarkByStripe(t *testing.T) {
	ctx := context.Background()
	size := g42.SegmentData()
	r := newRig(t, g42, size, rigOptions{})
	want := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(want)
	mustWriteFlushed(t, r.vol, want, 0)
	// An unflushed write that namespace 3 takes before it goes down.
	sd := g42.StripeData()
	rand.New(rand.NewSource(2)).Read(want[sd : 2*sd])
	if err := r.vol.WriteAt(ctx, want[sd:2*sd], sd); err != nil {
		t.Fatal(err)
	}
	r.devs[3].SetDown(true)
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Namespaces 0 and 1 miss a write of stripe 2 (stripe 1 is already
	// short of namespace 3's shard: it is not written now).
	r.devs[0].SetDown(true)
	r.devs[1].SetDown(true)
	r.devs[3].SetDown(false)
	if _, err := r.vol.Reinstate(ctx, r.names[3]); err != nil {
		t.Fatal(err)
	}
	rand.New(rand.NewSource(3)).Read(want[2*sd : 3*sd])
	if err := r.vol.WriteAt(ctx, want[2*sd:3*sd], 2*sd); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	marks, _ := r.stale.Stale(ctx)
	for _, m := range marks {
		if m.Stripes == nil {
			t.Errorf("slot %d (namespace %s) marked stale as a whole", m.Slot, m.Ref.NS)
		}
	}
	if len(marks) != 3 {
		t.Errorf("%d stale marks, want 3: %+v", len(marks), marks)
	}
	for _, i := range []int{0, 1} {
		r.devs[i].SetDown(false)
		if _, err := r.vol.Reinstate(ctx, r.names[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Namespace 5 is lost; stripes 0 and 3 missed nothing.
	r.devs[5].SetDown(true)
	for _, owner := range []string{"same owner", "new owner"} {
		if owner == "new owner" {
			r.reopen(t, r.deviceMap())
		}
		for _, st := range []int64{0, 3} {
			if err := readStripes(t, r, want, st, st+1); err != nil {
				t.Errorf("%s: stripe %d, which only namespace 5 lost: %v", owner, st, err)
			}
		}
	}
	r.devs[5].SetDown(false)
	r.reopen(t, r.deviceMap())
	if _, err := r.vol.Repair(ctx); err != nil {
		t.Fatal(err)
	}
	if marks, _ := r.stale.Stale(ctx); len(marks) != 0 {
		t.Fatalf("marks left after repair: %+v", marks)
	}
	// Whole again: any two namespaces may go.
	r.devs[0].SetDown(true)
	r.devs[3].SetDown(true)
	r.reopen(t, r.deviceMap())
	if err := readStripes(t, r, want, 0, 4); err != nil {
		t.Fatal(err)
	}
}

// TestReadErrorDistrustRepaired: a read error makes the volume distrust a
// slot from that stripe on; the mapping's upkeep (NeedsRepair) and a scrub
// must rebuild it while the volume stays open, so that two other
// namespaces may then go. Before, only a remap (a new open) trusted the
// slot again, and neither upkeep nor scrub touched it.
func TestReadErrorDistrustRepaired(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10, Checksums: true, Seed: 0x5eed}
	size := g.SegmentData()
	r := newRig(t, g, size, rigOptions{})
	want := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(want)
	if err := r.vol.WriteAt(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	if r.vol.NeedsRepair() {
		t.Fatal("a healthy volume needs repair")
	}
	r.devs[1].Add(faultdev.Rule{Action: faultdev.Fail, Ops: faultdev.OpRead, Times: 1, Err: blockdev.ErrCorrupt})
	got := make([]byte, size)
	if err := r.vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read around the read error: %v, equal %v", err, bytes.Equal(got, want))
	}
	if !r.vol.NeedsRepair() {
		t.Error("a slot distrusted after a read error does not make the volume need repair: upkeep leaves it")
	}
	if _, err := r.vol.Scrub(ctx, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if r.vol.NeedsRepair() {
		t.Error("the slot is still distrusted after a scrub")
	}
	r.devs[0].SetDown(true)
	r.devs[2].SetDown(true)
	if err := r.vol.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the scrub, two other namespaces down: %v, equal %v", err, bytes.Equal(got, want))
	}
}

// TestTornWriteNotTrustedOnReturn: two namespaces are cut off and a third
// tears a write as it goes (the write fails: three shards short); the
// flush finds them gone. When all come back, the torn stripe of the third
// must not be trusted: a read of the stripe fails or returns the old or the
// new content, never a mix rebuilt from the torn shard.
func TestTornWriteNotTrustedOnReturn(t *testing.T) {
	ctx := context.Background()
	for seed := int64(1); seed <= 8; seed++ {
		size := g42.SegmentData()
		r := newRig(t, g42, size, rigOptions{})
		old := make([]byte, size)
		rand.New(rand.NewSource(seed)).Read(old)
		mustWriteFlushed(t, r.vol, old, 0)
		sd := g42.StripeData()
		r.devs[0].SetDown(true)
		r.devs[1].SetDown(true)
		r.devs[3].Add(faultdev.Rule{Action: faultdev.Tear, Ops: faultdev.OpWrite, Times: 1})
		nw := make([]byte, sd)
		rand.New(rand.NewSource(100 + seed)).Read(nw)
		if err := r.vol.WriteAt(ctx, nw, sd); err == nil {
			t.Fatal("a write three shards short succeeded")
		}
		_ = r.vol.Flush(ctx) // fails: three namespaces gone
		for _, i := range []int{0, 1, 3} {
			r.devs[i].SetDown(false)
			if _, err := r.vol.Reinstate(ctx, r.names[i]); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]byte, sd)
		err := r.vol.ReadAt(ctx, got, sd)
		if err == nil && !bytes.Equal(got, old[sd:2*sd]) && !bytes.Equal(got, nw) {
			t.Fatalf("seed %d: the stripe read back neither old nor new: rebuilt from the torn shard", seed)
		}
	}
}
