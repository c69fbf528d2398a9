package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// lyingLayouts are the checksummed layouts the lying-device tests run on:
// one parity shard (a liar can only be refused) and two (it is found and
// read around), with and without the write log and the bound checksums.
var lyingLayouts = []layout.Geometry{
	{K: 2, M: 1, Chunk: 8 << 10, SlotSize: 256 << 10, Checksums: true, Log: true, Seed: 7},
	{K: 4, M: 2, Chunk: 8 << 10, SlotSize: 256 << 10, Checksums: true, Log: true, Seed: 7},
	{K: 3, M: 2, Chunk: 16 << 10, SlotSize: 256 << 10, Checksums: true},
}

// TestDroppedWriteThenCrash: a namespace acknowledges a write and its
// flush without making them (data block and checksum page both dropped),
// and the owner crashes. The new owner's checksums come from that
// namespace and agree with the old block; only the other shards of the
// stripe remember the write. Every read must return the acknowledged data,
// or, with one parity shard (nothing tells the stale shard from the
// others), fail with class ErrCorrupt; never the old bytes. The owner
// crashes with its segments clean (idle) or dirty (Recover resyncs them;
// with M >= 2 only).
func TestDroppedWriteThenCrash(t *testing.T) {
	for _, g := range lyingLayouts {
		for _, clean := range []bool{true, false} {
			if !clean && g.M == 1 {
				continue // resynced as its data holds it (see TestDroppedWritesProperty)
			}
			for _, at := range []int64{0, g.Chunk + 4096, g.StripeData() + 2*g.Chunk - 4096} {
				droppedWriteThenCrash(t, g, at, clean)
			}
		}
	}
}

// droppedWriteThenCrash is one case of TestDroppedWriteThenCrash: the
// block at at is overwritten while its namespace drops writes, then the
// volume is flushed (and its segments marked clean, when clean, as an idle
// owner does) and the owner crashes.
func droppedWriteThenCrash(t *testing.T, g layout.Geometry, at int64, clean bool) {
	t.Helper()
	ctx := context.Background()
	r, want := droppedWrite(t, g, 1, at, testutil.Pattern(4096, 99), clean)
	r.reopen(t, r.deviceMap()) // the owner crashed: nothing closed
	if _, err := r.vol.Recover(ctx); err != nil {
		t.Fatalf("%v at %d: recover: %v", g, at, err)
	}
	checkNotStale(t, r, g, want, at, clean)
}

// droppedWrite makes a rig of one segment of g, fills it with pattern seed
// and flushes; then it writes news at at while the namespace holding at
// drops writes, flushes, marks the segments clean when clean (as an idle
// owner does) and lets the namespace write again. It returns the rig, not
// reopened yet, and the acknowledged content.
func droppedWrite(t *testing.T, g layout.Geometry, seed byte, at int64, news []byte, clean bool) (*rig, []byte) {
	t.Helper()
	ctx := context.Background()
	size := g.SegmentData()
	r := newRig(t, g, size, rigOptions{})
	want := testutil.Pattern(int(size), seed)
	mustWriteFlushed(t, r.vol, want, 0)
	liar := r.devs[r.index(shardNS(t, r, at))]
	id := liar.Add(faultdev.Rule{Action: faultdev.Drop})
	mustWriteFlushed(t, r.vol, news, at)
	if clean {
		if err := r.vol.Clean(ctx); err != nil {
			t.Fatal(err)
		}
	}
	copy(want[at:], news)
	liar.Remove(id)
	return r, want
}

// checkNotStale reads the volume block by block: each block must be want,
// or (with M = 1, in the stripe of at) fail with class ErrCorrupt.
func checkNotStale(t *testing.T, r *rig, g layout.Geometry, want []byte, at int64, clean bool) {
	t.Helper()
	got := make([]byte, 4096)
	for off := int64(0); off < int64(len(want)); off += 4096 {
		err := r.vol.ReadAt(context.Background(), got, off)
		switch {
		case err == nil && bytes.Equal(got, want[off:off+4096]):
		case err == nil:
			t.Fatalf("%v, write at %d dropped (clean %v): block at %d reads stale bytes", g, at, clean, off)
		case g.M == 1 && off/g.StripeData() == at/g.StripeData() && errors.Is(err, blockdev.ErrCorrupt):
		default:
			t.Fatalf("%v, write at %d dropped (clean %v): block at %d: %v", g, at, clean, off, err)
		}
	}
}

// TestDroppedWritesProperty: random writes, each flushed, while up to M
// namespaces in turn drop every write for a random window of the writes
// (one lying at a time, so that no two lose the same write: two stale
// shards that agree with each other look like the truth to parity, and
// with M = 2 they would be taken for it); now and then the owner marks its
// segments clean; then the owner crashes and a new one recovers and reads
// every block (first scrubbing, or read-only, in the other modes; and the
// owner after it reads again). A block must read its last acknowledged
// value (or, for a write that failed, its old or new one); with one
// namespace lying and M >= 2 every read succeeds, otherwise a read may
// fail with class ErrCorrupt; no read returns other bytes. With M = 1 or
// more than one namespace lying, the owner is idle (its segments clean)
// before it crashes: a stripe written since its last flush is resynced as
// its data holds it.
func TestDroppedWritesProperty(t *testing.T) {
	cases := 60
	if testing.Short() {
		cases = 15
	}
	cases = max(cases, *soakChecks) // make soak-props: -volume.soak
	for _, g := range lyingLayouts {
		for _, then := range []string{"read", "scrub", "readonly"} {
			// One layout, or one seed: -run 'TestDroppedWritesProperty/4\+2/read/^609$'
			t.Run(fmt.Sprintf("%d+%d/%s", g.K, g.M, then), func(t *testing.T) {
				for seed := int64(1); seed <= int64(cases); seed++ {
					t.Run(fmt.Sprint(seed), func(t *testing.T) { droppedWritesCase(t, g, seed, then) })
				}
			})
		}
	}
}

// droppedWritesCase is one case of TestDroppedWritesProperty. What the new
// owner does, then: "read" recovers and reads every block; "scrub"
// recovers, scrubs and reads; "readonly" opens the volume read-only (the
// old owner was idle) and reads, writing nothing. Then the new owner
// crashes in turn and a third one recovers and reads every block again:
// what the second one wrote (a block it healed or found stale) must not
// make a later owner read other bytes either.
func droppedWritesCase(t *testing.T, g layout.Geometry, seed int64, then string) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	size := 2 * g.StripeData()
	r := newRig(t, g, size, rigOptions{})
	want := make([]byte, size)
	rng.Read(want)
	mustWriteFlushed(t, r.vol, want, 0)
	blocks := size / 4096
	may := make([][][]byte, blocks) // per block: other values a failed write may have left
	liars := rng.Perm(g.N())[:1+rng.Intn(g.M)]
	writes := 4 + rng.Intn(16)
	window := make([]int, writes) // per write: the liar dropping it, or -1
	for w := range window {
		window[w] = -1
	}
	for _, i := range liars {
		from := rng.Intn(writes)
		for w := from; w < min(writes, from+1+rng.Intn(6)); w++ {
			window[w] = i
		}
	}
	for w := range writes {
		for _, d := range r.devs {
			d.Clear()
		}
		if window[w] >= 0 {
			r.devs[window[w]].Add(faultdev.Rule{Action: faultdev.Drop})
		}
		n := int64(1+rng.Intn(int(2*g.Chunk/4096))) * 4096
		off := rng.Int63n((size-n)/4096+1) * 4096
		b := make([]byte, n)
		rng.Read(b)
		err := r.vol.WriteAt(ctx, b, off)
		if err == nil {
			err = r.vol.Flush(ctx)
		}
		for j := int64(0); j < n; j += 4096 {
			blk := (off + j) / 4096
			if err != nil {
				may[blk] = append(may[blk], bytes.Clone(want[off+j:off+j+4096]), b[j:j+4096])
			} else {
				may[blk] = nil
			}
		}
		copy(want[off:], b)
		if rng.Intn(3) == 0 {
			_ = r.vol.Clean(ctx)
		}
	}
	for _, d := range r.devs {
		d.Clear()
	}
	mayFail := g.M == 1 || len(liars) > 1
	if mayFail || then == "readonly" {
		if err := r.vol.Clean(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check := func(owner string, err error) {
		t.Helper()
		if err != nil && !(mayFail && errors.Is(err, blockdev.ErrCorrupt)) {
			t.Fatalf("%v seed %d, liars %v: %s: %v", g, seed, liars, owner, err)
		}
	}
	readAll := func(owner string) {
		t.Helper()
		got := make([]byte, 4096)
		for blk := range blocks {
			off := blk * 4096
			err := r.vol.ReadAt(ctx, got, off)
			switch {
			case err == nil && (bytes.Equal(got, want[off:off+4096]) || oneOf(got, may[blk])):
			case err == nil:
				t.Fatalf("%v seed %d, liars %v: %s: block %d reads bytes never acknowledged there", g, seed, liars, owner, blk)
			default:
				check(fmt.Sprintf("%s: block %d", owner, blk), err)
			}
		}
	}
	if then == "readonly" {
		v, err := New(Options{Geometry: g, Size: size, Devices: r.deviceMap(), Alloc: r.alloc, Stale: r.stale, ReadOnly: true, LogEpoch: r.epoch + 1})
		if err != nil {
			t.Fatal(err)
		}
		r.vol = v
		r.resetStats()
		readAll("read-only owner")
		if w := r.stats().Writes; w != 0 {
			t.Fatalf("%v seed %d: a read-only owner wrote %d times", g, seed, w)
		}
	} else {
		r.reopen(t, r.deviceMap())
		if _, err := r.vol.Recover(ctx); err != nil {
			t.Fatalf("%v seed %d: recover: %v", g, seed, err)
		}
		if then == "scrub" {
			_, err := r.vol.Scrub(ctx, 0, g.Segments(size)-1, nil)
			check("scrub", err)
		}
		readAll("new owner")
	}
	r.reopen(t, r.deviceMap()) // the new owner crashed in turn
	if _, err := r.vol.Recover(ctx); err != nil {
		t.Fatalf("%v seed %d: second recover: %v", g, seed, err)
	}
	readAll("third owner")
}

// TestScrubAfterDroppedWrite: a scrub by the new owner after a dropped
// write and a crash must not make parity match the stale block (the old
// code did, and the old bytes then read back with no error): with M >= 2
// it rebuilds the stale block, with M = 1 it leaves the row disputed.
func TestScrubAfterDroppedWrite(t *testing.T) {
	ctx := context.Background()
	for _, g := range lyingLayouts {
		at := g.Chunk + 4096
		size := g.SegmentData()
		r, want := droppedWrite(t, g, 1, at, testutil.Pattern(4096, 77), true)
		r.reopen(t, r.deviceMap())
		if _, err := r.vol.Scrub(ctx, 0, 0, nil); err != nil {
			t.Fatalf("%v: scrub: %v", g, err)
		}
		st := r.vol.ChecksumStats()
		if g.M > 1 && st.Stale != 1 || g.M == 1 && st.Unhealed == 0 {
			t.Errorf("%v: scrub counted %+v: want one stale block rebuilt (M >= 2) or a row left unhealed (M = 1)", g, st)
		}
		checkNotStale(t, r, g, want, at, true)
		if g.M > 1 {
			r.reopen(t, r.deviceMap()) // the rebuilt block is on disk
			mustEqual(t, g.String(), mustRead(t, r.vol, 0, int(size)), want)
		}
	}
}

// TestReadOnlyAfterDroppedWrite: a read-only owner (a read-only mapping)
// that opens the volume after a dropped write and a crash reads the
// acknowledged data around the stale shard (M >= 2), or fails (M = 1),
// and writes nothing.
func TestReadOnlyAfterDroppedWrite(t *testing.T) {
	for _, g := range lyingLayouts {
		at := g.StripeData() + 4096
		size := g.SegmentData()
		r, want := droppedWrite(t, g, 3, at, testutil.Pattern(8192, 55), true)
		v, err := New(Options{Geometry: g, Size: size, Devices: r.deviceMap(), Alloc: r.alloc, Stale: r.stale, ReadOnly: true, LogEpoch: r.epoch + 1})
		if err != nil {
			t.Fatal(err)
		}
		r.vol = v
		r.resetStats()
		checkNotStale(t, r, g, want, at, true)
		if w := r.stats().Writes; w != 0 {
			t.Errorf("%v: a read-only owner wrote %d times", g, w)
		}
	}
}

// TestRebuildAfterDroppedWrite: after a dropped write and a crash, another
// slot of the stripe goes stale and is rebuilt before anything reads the
// stripe. The rebuild must not reconstruct it from the stale shard (the
// old code did: the stripe then agreed with itself on bytes never
// written, and reads returned them). With one shard stale and one lost,
// 4+2 can tell that the other five disagree but not which is stale: the
// rebuild fails with class ErrCorrupt, and reads of the stripe return the
// acknowledged bytes or fail, never others.
func TestRebuildAfterDroppedWrite(t *testing.T) {
	ctx := context.Background()
	g := lyingLayouts[1] // 4+2: one stale shard and one rebuilt slot are within M
	at := g.StripeData() + 4096
	size := g.SegmentData()
	r, want := droppedWrite(t, g, 5, at, testutil.Pattern(4096, 66), true)
	liarNS := shardNS(t, r, at)
	r.reopen(t, r.deviceMap())
	mustRead(t, r.vol, 0, 4096) // opens the segment; proves stripe 0 only
	s := r.vol.cachedSegments()[0]
	stripe := at / g.StripeData()
	lost := g.SlotOf(stripe, 1) // data shard 1 of the stripe, on another namespace
	if s.slots[lost].ref.NS == liarNS {
		t.Fatal("the lost slot is the liar's")
	}
	s.lowerValid(lost, stripe)
	if _, err := r.vol.Repair(ctx); !errors.Is(err, blockdev.ErrCorrupt) {
		t.Fatalf("repair: %v, want class ErrCorrupt", err)
	}
	got := make([]byte, 4096)
	for off := int64(0); off < size; off += 4096 {
		err := r.vol.ReadAt(ctx, got, off)
		switch {
		case err == nil && bytes.Equal(got, want[off:off+4096]):
		case err == nil:
			t.Fatalf("block at %d reads bytes never written there", off)
		case off/g.StripeData() != stripe || !errors.Is(err, blockdev.ErrCorrupt):
			t.Fatalf("block at %d: %v", off, err)
		}
	}
}

// TestTwoLiarsHealNotFromStale is the shape of two namespaces lying in
// turn on a 4+2 volume. Namespace A loses an overwrite of both rows of a
// chunk; a later write puts A's checksum page from the owner's cache, so
// after a crash the new owner finds A's two blocks bad. Namespace B, in
// turn, loses an overwrite of row 1 of another shard of the same stripe,
// with its checksum: its block is stale yet matches. Row 1 then has one
// bad block and one stale good one, and the five good blocks do not agree.
// Reading row 0 (or a scrub) heals the stripe; the heal must not rebuild
// A's row 1 block from four of those five (the old code did: the rebuilt
// block and its four sources then agreed, the one parity block that held
// the acknowledged data looked stale and was rewritten, and row 1 read
// bytes never written). Row 1 must read its acknowledged bytes or fail
// with class ErrCorrupt, for the new owner and for the one after it.
func TestTwoLiarsHealNotFromStale(t *testing.T) {
	for _, scrub := range []bool{false, true} {
		twoLiarsHeal(t, scrub)
	}
}

func twoLiarsHeal(t *testing.T, scrub bool) {
	ctx := context.Background()
	g := lyingLayouts[1] // 4+2
	size := 2 * g.StripeData()
	r := newRig(t, g, size, rigOptions{})
	want := testutil.Pattern(int(size), 9)
	write := func(at int64, b []byte, liar string) {
		t.Helper()
		var d *faultdev.Dev
		if liar != "" {
			d = r.devs[r.index(liar)]
			d.Add(faultdev.Rule{Action: faultdev.Drop})
		}
		mustWriteFlushed(t, r.vol, b, at)
		if d != nil {
			d.Clear()
		}
		copy(want[at:], b)
	}
	write(0, bytes.Clone(want), "")
	a := g.StripeData() // stripe 1, shard 0: rows 0 and 1
	nsA := shardNS(t, r, a)
	write(a, testutil.Pattern(int(g.Chunk), 21), nsA)
	other := int64(-1) // a block of stripe 0 on A: rewrites A's checksum page
	for sh := int64(0); sh < int64(g.K); sh++ {
		if shardNS(t, r, sh*g.Chunk) == nsA {
			other = sh * g.Chunk
		}
	}
	if other < 0 {
		t.Fatal("A holds no data shard of stripe 0")
	}
	write(other, testutil.Pattern(4096, 22), "")
	b := g.StripeData() + 2*g.Chunk + 4096 // stripe 1, shard 2, row 1
	write(b, testutil.Pattern(4096, 23), shardNS(t, r, b))
	if err := r.vol.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{"new owner", "the one after"} {
		r.reopen(t, r.deviceMap()) // the owner crashed
		if _, err := r.vol.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		if scrub {
			if _, err := r.vol.Scrub(ctx, 0, 0, nil); err != nil && !errors.Is(err, blockdev.ErrCorrupt) {
				t.Fatalf("%s: scrub: %v", owner, err)
			}
		}
		got := make([]byte, 4096)
		for off := int64(0); off < size; off += 4096 {
			row1 := off/g.StripeData() == 1 && off%g.Chunk == 4096
			err := r.vol.ReadAt(ctx, got, off)
			switch {
			case err == nil && bytes.Equal(got, want[off:off+4096]):
			case err == nil:
				t.Fatalf("scrub %v, %s: block at %d reads bytes never acknowledged there", scrub, owner, off)
			case !row1 || !errors.Is(err, blockdev.ErrCorrupt):
				t.Fatalf("scrub %v, %s: block at %d: %v", scrub, owner, off, err)
			}
		}
	}
}
