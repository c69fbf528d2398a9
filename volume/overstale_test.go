package volume

import (
	"bytes"
	"context"
	"errors"
	"math/bits"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestOverStaleStripe: two namespaces of a 4+2 stripe are away while
// blocks are written (acknowledged), then a third goes and a write fails;
// all three come back and a new owner opens the volume. The stripe has
// three stale slots, more than parity covers, but every shard is there:
// each block must read its acknowledged value (the failed write's block
// either value), and Repair must finish and clear the marks, after which
// the stripe survives two other namespaces going. A row whose shards do
// not form one codeword (here: two of its blocks damaged behind the
// volume's back) must fail with class ErrCorrupt, never read other bytes,
// and Repair must still finish, leaving that stripe marked.
func TestOverStaleStripe(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10, Checksums: true}
	for _, damage := range []bool{false, true} {
		r := newRig(t, g, g.SegmentData(), rigOptions{})
		want := make([]byte, g.StripeData())
		rand.New(rand.NewSource(1)).Read(want)
		mustWriteFlushed(t, r.vol, want, 0)
		s := r.vol.cachedSegments()[0]
		nsOf := func(sh int) int { return r.index(s.slots[g.SlotOf(0, sh)].ref.NS) }
		block := func(sh, row int64) int64 { return sh*g.Chunk + row*layout.ChecksumBlock }
		write := func(off int64, seed byte) error {
			b := testutil.Pattern(layout.ChecksumBlock, seed)
			err := r.vol.WriteAt(ctx, b, off)
			if err == nil {
				copy(want[off:], b)
			}
			return err
		}
		r.devs[nsOf(1)].SetDown(true) // data shard 1
		if err := write(block(1, 1), 1); err != nil {
			t.Fatalf("write with one namespace away: %v", err)
		}
		r.devs[nsOf(4)].SetDown(true) // first parity shard
		for _, w := range []struct {
			off  int64
			seed byte
		}{{block(0, 0), 2}, {block(2, 3), 3}} {
			if err := write(w.off, w.seed); err != nil {
				t.Fatalf("write at %d with two namespaces away: %v", w.off, err)
			}
		}
		r.devs[nsOf(5)].SetDown(true) // second parity shard: three away
		failed := block(0, 2)
		if err := write(failed, 4); err == nil {
			t.Fatalf("a write with three of six namespaces away succeeded; down: %v, nss %d %d %d", r.vol.DownNamespaces(), nsOf(1), nsOf(4), nsOf(5))
		}
		// The flush finds the second parity shard gone with those writes
		// unflushed: it may have lost them, so it is stale too.
		_ = r.vol.Flush(ctx)
		_ = r.vol.Flush(ctx)
		for _, d := range r.devs {
			d.SetDown(false)
		}
		if damage { // two blocks of row 3 no longer match their checksums
			for _, sh := range []int{0, 5} {
				sl := s.slots[g.SlotOf(0, sh)]
				at := sl.ref.Slot*g.SlotSize + g.SlotOffset(layout.StripeID{}) + 3*layout.ChecksumBlock
				if err := r.mems[nsOf(sh)].WriteAt(ctx, testutil.Pattern(layout.ChecksumBlock, 9), at); err != nil {
					t.Fatal(err)
				}
			}
		}
		r.reopen(t, r.deviceMap())
		stale := 0
		for _, sl := range r.vol.mustSegment(t, 0).slots {
			if sl.hasHole(0) || sl.valid.Load() == 0 {
				stale++
			}
		}
		if stale <= g.M {
			t.Fatalf("%d stale slots after the failed write; the test needs more than %d", stale, g.M)
		}
		check := func(when string) {
			t.Helper()
			for off := int64(0); off < g.StripeData(); off += layout.ChecksumBlock {
				got := make([]byte, layout.ChecksumBlock)
				err := r.vol.ReadAt(ctx, got, off)
				row := off % g.Chunk / layout.ChecksumBlock
				switch {
				case damage && row == 3 && off/g.Chunk <= 1:
					if blockdev.Class(err) != blockdev.ErrCorrupt {
						t.Fatalf("%s: read of block at %d in a row whose shards disagree: err %v, want class ErrCorrupt", when, off, err)
					}
				case err != nil:
					t.Fatalf("%s: read of block at %d: %v", when, off, err)
				case off == failed:
					if !bytes.Equal(got, want[off:off+layout.ChecksumBlock]) && !bytes.Equal(got, testutil.Pattern(layout.ChecksumBlock, 4)) {
						t.Fatalf("%s: block of the failed write at %d holds neither version", when, off)
					}
				default:
					mustEqual(t, when, got, want[off:off+layout.ChecksumBlock])
				}
			}
		}
		check("after the heal")
		if _, err := r.vol.Repair(ctx); err != nil {
			t.Fatalf("repair: %v", err)
		}
		check("after repair")
		marks, _ := r.stale.Stale(ctx)
		if damage {
			if len(marks) == 0 {
				t.Fatal("repair cleared the marks of a stripe with a row it could not prove")
			}
			if n, err := r.vol.Repair(ctx); n != 0 || err != nil {
				t.Fatalf("repair again: %d stripes rebuilt, %v; want 0, nil (the unsettled stripe is left)", n, err)
			}
			continue
		}
		if len(marks) != 0 {
			t.Fatalf("marks left after repair: %v", marks)
		}
		r.devs[nsOf(0)].SetDown(true)
		r.devs[nsOf(3)].SetDown(true)
		r.reopen(t, r.deviceMap())
		check("after repair, with two other namespaces away")
	}
}

// mustSegment opens segment seg and returns it.
func (v *Volume) mustSegment(t *testing.T, seg int64) *segment {
	t.Helper()
	s, err := v.acquire(context.Background(), seg, false)
	if err != nil || s == nil {
		t.Fatalf("segment %d: %v", seg, errors.Join(err, errors.New("not allocated")))
	}
	s.io.RUnlock()
	return s
}

// TestOverStaleTornAlikeWrite: a write of a whole stripe whose blocks all
// change alike (each new block its old one xor one constant, one repeated
// block replacing another, a trim of repeated blocks) fails on three of
// six namespaces, which keep the old version, while the others take the
// new one; all come back and a new owner opens the volume. The stripe is
// over-stale, and its rows mix the two versions: with alike versions some
// five of the six blocks agree on a codeword neither wrote, and proving
// the rows by agreement alone rebuilt the sixth, a data block, from them:
// in 4 of the 20 choices of the failed namespaces, for each kind of data,
// Repair wrote bytes nobody wrote and reads returned them with no error
// (reads before Repair did too in 2 of the 4). Every block must read the
// old or the new version, or fail with class ErrCorrupt, and Repair must
// finish.
func TestOverStaleTornAlikeWrite(t *testing.T) {
	noLog := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10, Checksums: true}
	withLog := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 512 << 10, Checksums: true, Log: true}
	for _, tc := range []struct {
		name string
		g    layout.Geometry
		data func(int, byte) []byte
		trim bool
	}{
		{"xor/nolog", noLog, testutil.Pattern, false},
		{"repeated/nolog", noLog, repeatedBlock, false},
		{"trim/nolog", noLog, repeatedBlock, true},
		{"xor/log", withLog, testutil.Pattern, false},
		{"trim/log", withLog, repeatedBlock, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for failed := range 1 << tc.g.N() {
				if bits.OnesCount(uint(failed)) == tc.g.M+1 {
					tornAlikeWrite(t, tc.g, tc.data, tc.trim, failed)
				}
			}
		})
	}
}

// tornAlikeWrite is one case of TestOverStaleTornAlikeWrite: failed has
// a bit set for each shard whose namespace fails the write.
func tornAlikeWrite(t *testing.T, g layout.Geometry, data func(int, byte) []byte, trim bool, failed int) {
	ctx := context.Background()
	r := newRig(t, g, g.SegmentData(), rigOptions{})
	span := g.StripeData()
	old, nw := data(int(span), 1), data(int(span), 2)
	if trim { // all but the last block: a whole stripe is trimmed shard by shard, not written
		nw = append(make([]byte, span-layout.ChecksumBlock), old[span-layout.ChecksumBlock:]...)
	}
	mustWriteFlushed(t, r.vol, old, 0)
	s := r.vol.cachedSegments()[0]
	for sh := range g.N() {
		if failed&(1<<sh) != 0 {
			ns := r.index(s.slots[g.SlotOf(0, sh)].ref.NS)
			r.devs[ns].Add(faultdev.Rule{Action: faultdev.Fail, Ops: faultdev.OpWrite | faultdev.OpWriteZeroes | faultdev.OpTrim})
		}
	}
	var err error
	if trim {
		err = r.vol.Trim(ctx, 0, span-layout.ChecksumBlock)
	} else {
		err = r.vol.WriteAt(ctx, nw, 0)
	}
	if err == nil {
		t.Fatalf("shards %06b failed: the write succeeded with %d of %d namespaces failing", failed, g.M+1, g.N())
	}
	_ = r.vol.Flush(ctx)
	for _, d := range r.devs {
		d.Clear()
		d.SetDown(false)
	}
	r.reopen(t, r.deviceMap())
	check := func(when string) {
		t.Helper()
		got := make([]byte, layout.ChecksumBlock)
		for off := int64(0); off < span; off += layout.ChecksumBlock {
			err := r.vol.ReadAt(ctx, got, off)
			switch {
			case err != nil && blockdev.Class(err) != blockdev.ErrCorrupt:
				t.Fatalf("shards %06b failed, %s: read of block at %d: %v", failed, when, off, err)
			case err == nil && !bytes.Equal(got, old[off:off+layout.ChecksumBlock]) && !bytes.Equal(got, nw[off:off+layout.ChecksumBlock]):
				t.Fatalf("shards %06b failed, %s: block at %d (chunk %d, row %d) reads neither version", failed, when, off, off/g.Chunk, off%g.Chunk/layout.ChecksumBlock)
			}
		}
	}
	check("after the reopen")
	if _, err := r.vol.Repair(ctx); err != nil {
		t.Fatalf("shards %06b failed: repair: %v", failed, err)
	}
	check("after repair")
}
