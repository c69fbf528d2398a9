package volume

import (
	"bytes"
	"context"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// FuzzChecksumPage changes the first checksum page of one slot of a
// written volume (what a disk, or whoever writes to it, returns there):
// the input is xored into the page as stored, so a short input changes a
// few checksums and an empty one none. Every layout of csumLayouts (format
// 4 among them, whose stored checksums are bound to their place). One
// slot's page spoils at most one shard of any row, within M, so after a
// fresh open every block must read back as written (never other bytes, and
// no error), a scrub must succeed, and a second scrub of a fresh open must
// find nothing left to heal. The seed corpus is in testdata/fuzz.
func FuzzChecksumPage(f *testing.F) {
	f.Add(byte(0), byte(0), []byte{})
	f.Add(byte(1), byte(5), []byte{0, 0, 0, 0, 1})
	f.Add(byte(3), byte(2), bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, layoutIdx, slot byte, xor []byte) {
		ctx := context.Background()
		g := csumLayouts[int(layoutIdx)%len(csumLayouts)]
		size := g.SegmentData()
		r := newRig(t, g, size, rigOptions{crashable: true})
		want := testutil.Pattern(int(size), layoutIdx^slot)
		if err := r.vol.WriteAt(ctx, want, 0); err != nil {
			t.Fatal(err)
		}
		restart(t, r)
		xorChecksumPage(t, r, int(slot)%g.N(), xor)
		restart(t, r)
		got := make([]byte, 4096)
		for off := int64(0); off < size; off += 4096 {
			if err := r.vol.ReadAt(ctx, got, off); err != nil || !bytes.Equal(got, want[off:off+4096]) {
				t.Fatalf("block at %d with one slot's checksums changed: %v, same bytes: %v", off, err, bytes.Equal(got, want[off:off+4096]))
			}
		}
		if _, err := r.vol.Scrub(ctx, 0, 0, nil); err != nil {
			t.Fatalf("scrub: %v", err)
		}
		restart(t, r)
		if _, err := r.vol.Scrub(ctx, 0, 0, nil); err != nil {
			t.Fatalf("second scrub: %v", err)
		}
		if st := r.vol.ChecksumStats(); st.Mismatches != 0 || st.Unhealed != 0 {
			t.Fatalf("second scrub after the first healed: %+v", st)
		}
	})
}

// xorChecksumPage xors x (at most a page) into the first checksum page of
// slot i of segment 0, on the namespace behind the volume, durably.
func xorChecksumPage(t *testing.T, r *rig, i int, x []byte) {
	ctx := context.Background()
	refs, ok, err := r.alloc.Lookup(ctx, 0)
	if err != nil || !ok {
		t.Fatalf("segment 0: lookup: %v %v", ok, err)
	}
	mem := r.mems[r.index(refs[i].NS)]
	at := refs[i].Slot*r.g.SlotSize + r.g.DataEnd()
	page := make([]byte, sumPageSize)
	if err := mem.ReadAt(ctx, page, at); err != nil {
		t.Fatal(err)
	}
	for j := range min(len(x), len(page)) {
		page[j] ^= x[j]
	}
	if err := mem.WriteAt(ctx, page, at); err != nil {
		t.Fatal(err)
	}
	if err := mem.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}
