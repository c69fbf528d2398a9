package volume

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"slices"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
	"pgregory.net/rapid"
)

// The write-hole properties: random IO on a format 3 volume, a crash
// keeping a random subset of the unflushed blocks, then slots lost
// (marked stale, as a namespace that missed writes is) before the next
// owner recovers. Every block reads what it held at the last flush or a
// value written since; a block written since may instead fail with class
// ErrCorrupt when it is on a lost slot; no read returns other bytes.

// holeCase says what a write-hole property draws besides writes and
// flushes.
type holeCase struct {
	zeroes   bool // trims and write-zeroes (whole stripes or not), rewrites of the last range written, slot moves
	lost     int  // slots lost in each segment (at most M)
	crashRec bool // a crash in the middle of the first recovery, then a second recovery
}

// TestPropertyWriteHole: writes and flushes, one slot lost per segment.
func TestPropertyWriteHole(t *testing.T) {
	for _, g := range holeLayouts() {
		t.Run(g.String(), func(t *testing.T) {
			checkProperty(t, holeRounds(g), func(rt *rapid.T) { runHole(rt, g, holeCase{lost: 1}) })
		})
	}
}

// TestPropertyWriteHoleOps adds trims, write-zeroes, rewrites of a range
// and slot moves (to a spare namespace) within one epoch.
func TestPropertyWriteHoleOps(t *testing.T) {
	for _, g := range holeLayouts() {
		t.Run(g.String(), func(t *testing.T) {
			checkProperty(t, 1, func(rt *rapid.T) { runHole(rt, g, holeCase{zeroes: true, lost: 1}) })
		})
	}
}

// TestPropertyWriteHoleTwoLost loses M slots per segment where M >= 2.
// The log solves one lost data shard per stripe; a stripe written since
// the last flush with two lost defers (its segment stays dirty), and its
// blocks on the lost slots, like any block written since, may read as
// corrupt. No block reads other bytes, and stripes not written since the
// flush read in full.
func TestPropertyWriteHoleTwoLost(t *testing.T) {
	for _, g := range holeLayouts() {
		if g.M < 2 {
			continue
		}
		t.Run(g.String(), func(t *testing.T) {
			checkProperty(t, 1, func(rt *rapid.T) { runHole(rt, g, holeCase{zeroes: true, lost: g.M}) })
		})
	}
}

// TestPropertyWriteHoleRecoverCrash crashes the first recovery part way
// (after a drawn number of its device writes, keeping a random subset of
// its unflushed ones) and recovers again.
func TestPropertyWriteHoleRecoverCrash(t *testing.T) {
	for _, g := range holeLayouts() {
		t.Run(g.String(), func(t *testing.T) {
			checkProperty(t, 1, func(rt *rapid.T) { runHole(rt, g, holeCase{zeroes: true, lost: 1, crashRec: true}) })
		})
	}
}

// holeLayouts are the write-hole properties' geometries: the format 3
// ones (pplLayouts) and the same with checksums bound to their place
// (format 4), whose stored checksums the recovery reads through the tags.
func holeLayouts() []layout.Geometry {
	gs := slices.Clone(pplLayouts)
	for _, g := range pplLayouts {
		g.Seed = 0x5eed_0f_f0_4a11
		gs = append(gs, g)
	}
	return gs
}

// holeRounds is how many runs of the property's checks make the CI run
// of layout g: more where a case is cheap (3+1, format 3).
func holeRounds(g layout.Geometry) int {
	if g.K == 3 && g.Seed == 0 {
		return 3
	}
	return 1
}

func runHole(t *rapid.T, g layout.Geometry, hc holeCase) {
	c := newCrashRig(t, g)
	c.pattern = crashPatterns[rapid.IntRange(0, len(crashPatterns)-1).Draw(t, "data")]
	if hc.zeroes {
		c = &crashRig{size: c.size, m: c.m, r: newRig(t, g, c.size, rigOptions{crashable: true, namespaces: g.N() + 1}), pattern: c.pattern}
	}
	var last [2]int64 // the last range written
	for n := rapid.IntRange(1, 40).Draw(t, "ops"); n > 0; n-- {
		op := rapid.IntRange(0, 9).Draw(t, "op")
		switch {
		case op == 0:
			c.flush(t)
		case hc.zeroes && op == 1:
			off, n := holeRange(t, g, c.size, "t")
			c.trim(t, off, n)
		case hc.zeroes && op == 2:
			off, n := holeRange(t, g, c.size, "z")
			c.zeroes(t, off, n)
		case hc.zeroes && op == 3 && last[1] > 0:
			c.write(t, last[0], last[1])
		case hc.zeroes && op == 4:
			c.move(t, rapid.Int64Range(0, g.Segments(c.size)-1).Draw(t, "move-seg"), rapid.IntRange(0, g.N()-1).Draw(t, "move-slot"))
		default:
			off, n := propRange(t, g, c.size, "w")
			c.write(t, off, n)
			last = [2]int64{off, n}
		}
	}
	crashed := crashDevices(c.r, rapid.Int64().Draw(t, "crash-seed"))
	lost := c.loseSlots(t, hc.lost)
	dirty, err := c.r.dirty.Dirty(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if hc.crashRec {
		crashed = c.crashRecovery(t, crashed, rapid.IntRange(0, 300).Draw(t, "recover-crash-at"), rapid.Int64().Draw(t, "recover-crash-seed"))
		for _, seg := range dirty { // the crash came before it marked them clean
			if err := c.r.dirty.MarkDirty(context.Background(), seg); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.r.reopen(t, crashed)
	if _, err := c.r.vol.Recover(context.Background()); err != nil {
		t.Fatalf("recover: %v", err)
	}
	c.checkHole(t, lost, hc.lost > 1)
}

// holeRange draws a range to zero: whole stripes half the time (zeroed
// on every shard, not written), else as propRange.
func holeRange(t *rapid.T, g layout.Geometry, size int64, what string) (int64, int64) {
	if !rapid.Bool().Draw(t, what+"-stripes") {
		return propRange(t, g, size, what)
	}
	stripes := size / g.StripeData()
	first := rapid.Int64Range(0, stripes-1).Draw(t, what+"-first-stripe")
	n := rapid.Int64Range(1, min(stripes-first, 4)).Draw(t, what+"-stripes-n")
	return first * g.StripeData(), n * g.StripeData()
}

// crashDevices returns crash clones of the rig's devices, each keeping a
// random subset of its unflushed blocks (seed).
func crashDevices(r *rig, seed int64) DeviceMap {
	rng := rand.New(rand.NewSource(seed))
	crashed := DeviceMap{}
	for i, mem := range r.mems {
		crashed[r.names[i]] = mem.CrashCloneRand(rng)
	}
	return crashed
}

// loseSlots marks n drawn slots of every allocated segment stale and
// returns, per segment, the namespaces lost.
func (c *crashRig) loseSlots(t *rapid.T, n int) map[int64][]string {
	ctx := context.Background()
	g := c.r.g
	lost := map[int64][]string{}
	for seg := int64(0); seg < g.Segments(c.size); seg++ {
		refs, ok, err := c.r.alloc.Lookup(ctx, seg)
		if err != nil || !ok {
			continue
		}
		slots := rapid.SliceOfNDistinct(rapid.IntRange(0, g.N()-1), n, n, rapid.ID[int]).Draw(t, "lost-slots")
		for _, i := range slots {
			if err := c.r.stale.MarkStale(ctx, StaleSlot{Segment: seg, Slot: i, Ref: refs[i]}); err != nil {
				t.Fatal(err)
			}
			lost[seg] = append(lost[seg], refs[i].NS)
		}
	}
	return lost
}

// crashRecovery opens the crashed devices and recovers, crashing them
// again after the recovery's at-th device write (or flush, trim) with
// the unflushed blocks kept as seed picks, and returns those devices.
func (c *crashRig) crashRecovery(t *rapid.T, crashed DeviceMap, at int, seed int64) DeviceMap {
	cp := &crashPoint{at: at, rng: rand.New(rand.NewSource(seed)), mems: crashed, names: c.r.names}
	c.r.reopen(t, cp.wrap())
	if _, err := c.r.vol.Recover(context.Background()); err != nil {
		t.Fatalf("recover (to be interrupted): %v", err)
	}
	return cp.snapshot()
}

// checkHole reads every block and checks it against the model. With
// several slots lost per segment, blocks written since the last flush,
// and blocks on lost slots of stripes written since, may read as corrupt.
func (c *crashRig) checkHole(t *rapid.T, lost map[int64][]string, several bool) {
	ctx := context.Background()
	g := c.r.g
	got := make([]byte, 4096)
	zero := make([]byte, 4096)
	for b := range c.m.flushed {
		off := int64(b) * 4096
		err := c.r.vol.ReadAt(ctx, got, off)
		since := c.m.since[b]
		if err != nil {
			onLost := slices.Contains(lost[off/g.SegmentData()], shardNS(t, c.r, off))
			if errors.Is(err, blockdev.ErrCorrupt) && (len(since) > 0 && onLost || several && (len(since) > 0 || onLost && c.stripeWritten(b))) {
				continue
			}
			t.Fatalf("block %d (%d writes since the last flush, on a lost slot: %v): read: %v", b, len(since), onLost, err)
		}
		ok := bytes.Equal(got, orZero(c.m.flushed[b], zero))
		for _, v := range since {
			ok = ok || bytes.Equal(got, orZero(v, zero))
		}
		if !ok {
			t.Fatalf("block %d reads bytes never written there (%d writes since the last flush)", b, len(since))
		}
	}
}

// crashPoint crashes a set of in-memory devices at the at-th write, flush,
// trim or write-zeroes made through the wrappers it hands out: it keeps
// crash clones of them all as they were then, and lets the calls go on.
type crashPoint struct {
	mu    sync.Mutex
	n, at int
	rng   *rand.Rand
	mems  DeviceMap // *blockdev.Mem each
	names []string
	snap  DeviceMap
}

func (cp *crashPoint) wrap() DeviceMap {
	out := DeviceMap{}
	for n, d := range cp.mems {
		out[n] = pointDev{blockdev.Passthrough{Device: d}, cp}
	}
	return out
}

// tick counts a call that changes a device, and crashes them all first
// when it is the at-th.
func (cp *crashPoint) tick() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.n == cp.at {
		cp.snap = cp.cloneLocked()
	}
	cp.n++
}

// snapshot returns the crash clones, taken now if no call reached at.
func (cp *crashPoint) snapshot() DeviceMap {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.snap == nil {
		cp.snap = cp.cloneLocked()
	}
	return cp.snap
}

func (cp *crashPoint) cloneLocked() DeviceMap {
	out := DeviceMap{}
	for _, n := range cp.names { // in order: the clones depend on rng's sequence
		out[n] = cp.mems[n].(*blockdev.Mem).CrashCloneRand(cp.rng)
	}
	return out
}

// pointDev is a device whose changes tick a crashPoint.
type pointDev struct {
	blockdev.Passthrough
	cp *crashPoint
}

func (d pointDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	d.cp.tick()
	return d.Device.WriteAt(ctx, p, off)
}

func (d pointDev) WriteAtFUA(ctx context.Context, p []byte, off int64) error {
	d.cp.tick()
	return d.Passthrough.WriteAtFUA(ctx, p, off)
}

func (d pointDev) Flush(ctx context.Context) error {
	d.cp.tick()
	return d.Device.Flush(ctx)
}

func (d pointDev) Trim(ctx context.Context, off, n int64) error {
	d.cp.tick()
	return d.Device.Trim(ctx, off, n)
}

func (d pointDev) WriteZeroes(ctx context.Context, off, n int64) error {
	d.cp.tick()
	return d.Device.WriteZeroes(ctx, off, n)
}

// stripeWritten reports whether a block of the stripe of block b was
// written since the last flush.
func (c *crashRig) stripeWritten(b int) bool {
	per := int(c.r.g.StripeData() / 4096)
	for i := b - b%per; i < b-b%per+per; i++ {
		if len(c.m.since[i]) > 0 {
			return true
		}
	}
	return false
}

// move moves slot idx of segment seg, if allocated, to a free slot of a
// namespace the segment does not use, and releases the old one.
func (c *crashRig) move(t *rapid.T, seg int64, idx int) {
	ctx := context.Background()
	r := c.r
	slots, ok, err := r.alloc.Lookup(ctx, seg)
	if err != nil || !ok {
		return
	}
	to := freeSlotBeside(t, r, slots)
	err = r.vol.MoveSlot(ctx, seg, idx, to, MoveOptions{
		Commit: func(ctx context.Context) error { return r.alloc.Replace(ctx, seg, idx, to) },
	})
	if err != nil {
		t.Fatalf("move segment %d slot %d to %v: %v", seg, idx, to, err)
	}
	r.alloc.Release(slots[idx])
}

// freeSlotBeside reserves a slot on a namespace not in slots.
func freeSlotBeside(t tb, r *rig, slots []SlotRef) SlotRef {
	for d, name := range r.names {
		if slices.ContainsFunc(slots, func(s SlotRef) bool { return s.NS == name }) {
			continue
		}
		for slot := int64(1); slot < r.mems[d].Size()/r.g.SlotSize; slot++ {
			if ref := (SlotRef{NS: name, Slot: slot}); r.alloc.Reserve(ref) == nil {
				return ref
			}
		}
	}
	t.Fatal("no free slot to move to")
	return SlotRef{}
}
