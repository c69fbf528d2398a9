package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestTrimPastParity: stripes of a 4+2 volume are trimmed or zeroed while
// one, two or three namespaces cannot take it: they fail every write,
// trim and write-zeroes (fail), fail every IO (down), or are known down
// to the volume before the trim starts (known). Whole stripes are zeroed
// shard by shard; a partial stripe goes through the write path.
//
// With at most M failing, the zeroing is acknowledged and reads return
// zeros in its range and the old data around it: at once, after the
// namespaces come back and a new owner opens the volume, after Repair,
// and then with two other namespaces away; before Repair, the stripes it
// did not touch survive two other namespaces going (the failed ones
// missed the zeroed stripes only). With M+1 failing (each of the 20
// choices), it must fail with a *StripeError (class ErrUnavailable), like
// a write that cannot reach K shards, no read may return bytes nobody
// wrote (old data or zeros in the range; an error while the namespaces
// are away, class ErrCorrupt once they are back), and Repair must finish;
// a zeroing that failed before it started (known) must leave the old data
// readable. Before the fix a whole-stripe zeroing with M+1 failing was
// acknowledged, and the stripes read the old data or failed as corrupt.
func TestTrimPastParity(t *testing.T) {
	noLog := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 128 << 10, Checksums: true}
	withLog := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 512 << 10, Checksums: true, Log: true}
	sd := noLog.StripeData()
	ops := []trimOp{
		{"trim", sd, 2 * sd, (*Volume).Trim},
		{"zeroes", sd, 2 * sd, (*Volume).WriteZeroes},
		{"trim-partial", sd, sd - layout.ChecksumBlock, (*Volume).Trim},
	}
	for _, g := range []layout.Geometry{noLog, withLog} {
		for _, op := range ops {
			for _, mode := range []string{"fail", "down", "known"} {
				t.Run(fmt.Sprintf("log=%v/%s/%s", g.Log, op.name, mode), func(t *testing.T) {
					for failed := range 1 << g.N() {
						if n := bits.OnesCount(uint(failed)); n > 0 && n <= g.M+1 {
							trimPastParity(t, g, op, mode, failed)
						}
					}
				})
			}
		}
	}
}

// trimOp is a zeroing of [off, off+n) by Trim or WriteZeroes.
type trimOp struct {
	name   string
	off, n int64
	do     func(v *Volume, ctx context.Context, off, n int64) error
}

// trimPastParity is one case of TestTrimPastParity: failed has a bit set
// for each namespace that cannot take the zeroing.
func trimPastParity(t *testing.T, g layout.Geometry, op trimOp, mode string, failed int) {
	ctx := context.Background()
	r := newRig(t, g, g.SegmentData(), rigOptions{})
	old := make([]byte, 4*g.StripeData())
	rand.New(rand.NewSource(int64(failed))).Read(old)
	mustWriteFlushed(t, r.vol, old, 0)
	for ns := range r.devs {
		if failed&(1<<ns) == 0 {
			continue
		}
		switch mode {
		case "fail":
			r.devs[ns].Add(faultdev.Rule{Action: faultdev.Fail, Ops: faultdev.OpWrite | faultdev.OpWriteZeroes | faultdev.OpTrim})
		case "down":
			r.devs[ns].SetDown(true)
		case "known":
			r.vol.SetNamespaceUp(r.names[ns], false)
		}
	}
	acked := bits.OnesCount(uint(failed)) <= g.M
	err := op.do(r.vol, ctx, op.off, op.n)
	var se *StripeError
	switch {
	case acked && err != nil:
		t.Fatalf("namespaces %06b failed: %v", failed, err)
	case !acked && err == nil:
		t.Fatalf("namespaces %06b failed: acknowledged with %d of %d namespaces failing", failed, g.M+1, g.N())
	case !acked && (blockdev.Class(err) != blockdev.ErrUnavailable || !errors.As(err, &se)):
		t.Fatalf("namespaces %06b failed: %v; want a *StripeError of class ErrUnavailable", failed, err)
	}
	c := trimCheck{t: t, v: r.vol, op: op, old: old, failed: failed, acked: acked}
	c.run("at once", false, mode == "known" && !acked)
	_ = r.vol.Flush(ctx) // fails while namespaces are away; the reopen below is no crash
	for _, d := range r.devs {
		d.Clear()
		d.SetDown(false)
	}
	r.reopen(t, r.deviceMap())
	c.v = r.vol
	c.run("after the namespaces came back", true, mode == "known" && !acked)
	if acked { // the namespaces that failed missed the zeroed stripes only
		setAway(t, r, failed, true)
		c.v = r.vol
		c.untouched("before repair, with two other namespaces away")
		setAway(t, r, failed, false)
		c.v = r.vol
	}
	if _, err := r.vol.Repair(ctx); err != nil {
		t.Fatalf("namespaces %06b failed: repair: %v", failed, err)
	}
	c.run("after repair", true, mode == "known" && !acked)
	if acked {
		setAway(t, r, failed, true)
		c.v = r.vol
		c.run("after repair, with two other namespaces away", true, false)
	}
}

// setAway sets M namespaces not in failed down (or up again) and opens
// the volume anew.
func setAway(t *testing.T, r *rig, failed int, down bool) {
	t.Helper()
	away := 0
	for ns := range r.devs {
		if failed&(1<<ns) == 0 && away < r.g.M {
			r.devs[ns].SetDown(down)
			away++
		}
	}
	_ = r.vol.Flush(context.Background())
	r.reopen(t, r.deviceMap())
}

// trimCheck reads back the first four stripes after a zeroing.
type trimCheck struct {
	t      *testing.T
	v      *Volume
	op     trimOp
	old    []byte
	failed int
	acked  bool // the zeroing was acknowledged
}

// touched reports whether the block at off is in a stripe the zeroing
// touched.
func (c trimCheck) touched(off int64) bool {
	sd := c.v.g.StripeData()
	return off/sd >= c.op.off/sd && off/sd <= (c.op.off+c.op.n-1)/sd
}

// untouched reads the blocks of the stripes the zeroing did not touch:
// each must read the old data.
func (c trimCheck) untouched(when string) {
	c.t.Helper()
	sd := c.v.g.StripeData()
	got := make([]byte, layout.ChecksumBlock)
	for off := int64(0); off < int64(len(c.old)); off += layout.ChecksumBlock {
		if c.touched(off) {
			continue
		}
		where := fmt.Sprintf("namespaces %06b failed, %s: block at %d (stripe %d)", c.failed, when, off, off/sd)
		if err := c.v.ReadAt(context.Background(), got, off); err != nil {
			c.t.Fatalf("%s: %v", where, err)
		}
		mustEqual(c.t, where+", want the old data", got, c.old[off:off+layout.ChecksumBlock])
	}
}

// run reads each block. After an acknowledged zeroing, every read must
// succeed, with zeros in the range and the old data elsewhere. After a
// failed one, a read that succeeds returns the old data, or zeros in the
// range unless the zeroing changed nothing (unchanged); once the
// namespaces are back (back), a read may fail only in a stripe the
// zeroing touched, with class ErrCorrupt.
func (c trimCheck) run(when string, back, unchanged bool) {
	c.t.Helper()
	sd := c.v.g.StripeData()
	got := make([]byte, layout.ChecksumBlock)
	zeros := make([]byte, layout.ChecksumBlock)
	for off := int64(0); off < int64(len(c.old)); off += layout.ChecksumBlock {
		err := c.v.ReadAt(context.Background(), got, off)
		old := c.old[off : off+layout.ChecksumBlock]
		inRange := off >= c.op.off && off < c.op.off+c.op.n
		where := fmt.Sprintf("namespaces %06b failed, %s: block at %d (stripe %d)", c.failed, when, off, off/sd)
		switch {
		case err != nil && (c.acked || back && (unchanged || !c.touched(off))):
			c.t.Fatalf("%s: %v", where, err)
		case err != nil && back && blockdev.Class(err) != blockdev.ErrCorrupt:
			c.t.Fatalf("%s: %v; want class ErrCorrupt", where, err)
		case err != nil:
		case c.acked && inRange:
			mustEqual(c.t, where+", want zeros", got, zeros)
		case c.acked || unchanged || !inRange:
			mustEqual(c.t, where+", want the old data", got, old)
		case !bytes.Equal(got, old) && !bytes.Equal(got, zeros):
			c.t.Fatalf("%s: reads neither the old data nor zeros", where)
		}
	}
}

// TestTrimFreePastParity: a trim of a whole segment frees it, which needs
// no shard: with M+1 of the namespaces failing writes and trims (each of
// the 20 choices), it is acknowledged and the segment reads as zeros, also
// after the namespaces come back and a new owner opens the volume; a write
// then allocates the segment afresh and reads back.
func TestTrimFreePastParity(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 128 << 10, Checksums: true}
	size := g.SegmentData()
	for failed := range 1 << g.N() {
		if bits.OnesCount(uint(failed)) != g.M+1 {
			continue
		}
		r := newRig(t, g, size, rigOptions{})
		mustWriteFlushed(t, r.vol, testutil.Pattern(int(size), 1), 0)
		for ns := range r.devs {
			if failed&(1<<ns) != 0 {
				r.devs[ns].Add(faultdev.Rule{Action: faultdev.Fail, Ops: faultdev.OpWrite | faultdev.OpWriteZeroes | faultdev.OpTrim})
			}
		}
		if err := r.vol.Trim(ctx, 0, size); err != nil {
			t.Fatalf("namespaces %06b failed: trim of a whole segment: %v", failed, err)
		}
		if ext, err := r.vol.Allocated(ctx, 0, size); len(ext) != 0 || err != nil {
			t.Fatalf("namespaces %06b failed: allocated after the trim: %v, %v; want none", failed, ext, err)
		}
		mustEqual(t, fmt.Sprintf("namespaces %06b failed: after the trim", failed), mustRead(t, r.vol, 0, int(size)), make([]byte, size))
		for _, d := range r.devs {
			d.Clear()
			d.SetDown(false)
		}
		r.reopen(t, r.deviceMap())
		mustEqual(t, fmt.Sprintf("namespaces %06b failed: after a reopen", failed), mustRead(t, r.vol, 0, int(size)), make([]byte, size))
		want := testutil.Pattern(int(size), 2)
		mustWriteFlushed(t, r.vol, want, 0)
		mustEqual(t, fmt.Sprintf("namespaces %06b failed: written again", failed), mustRead(t, r.vol, 0, int(size)), want)
	}
}
