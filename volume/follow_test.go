package volume

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// gate is a device whose reads block, once armed, until it is opened: a
// read caught in flight.
type gate struct {
	blockdev.Passthrough
	armed   atomic.Bool
	entered chan struct{} // closed by the first read that blocks
	open    chan struct{}
	once    sync.Once
	// left is set once a read that blocked has read the device (before
	// the volume's IO that issued it can end).
	left atomic.Bool
	// fail, when set before open is closed, is what the reads that
	// blocked return, without reading the device.
	fail error
	// ended is closed when the first read that blocked returns.
	ended   chan struct{}
	endOnce sync.Once
}

func newGate(d blockdev.Device) *gate {
	return &gate{Passthrough: blockdev.Passthrough{Device: d}, entered: make(chan struct{}), open: make(chan struct{}), ended: make(chan struct{})}
}

func (g *gate) ReadAt(ctx context.Context, p []byte, off int64) error {
	if !g.armed.Load() {
		return g.Device.ReadAt(ctx, p, off)
	}
	g.once.Do(func() { close(g.entered) })
	<-g.open
	defer g.endOnce.Do(func() { close(g.ended) })
	if g.fail != nil {
		return g.fail
	}
	defer g.left.Store(true)
	return g.Device.ReadAt(ctx, p, off)
}

// Synchronous is false: a read may wait for the gate (blockdev.Passthrough).
func (g *gate) Synchronous() bool { return false }

// hookedSet is a DeviceSet that calls hook before resolving a namespace.
type hookedSet struct {
	DeviceMap
	hook func(ns string)
}

func (h hookedSet) Device(ctx context.Context, ns string) (blockdev.Device, error) {
	h.hook(ns)
	return h.DeviceMap.Device(ctx, ns)
}

// readerOf opens a read-only volume over r's namespaces (the one of the
// namespace named gated behind g) and allocator, with events ev; hook (nil:
// none) hears every namespace it resolves.
func readerOf(t *testing.T, r *rig, gated string, g *gate, ev EventListener, hook func(string)) *Volume {
	t.Helper()
	dm := DeviceMap{}
	for i, n := range r.names {
		dm[n] = r.devs[i]
		if n == gated {
			dm[n] = g
		}
	}
	if hook == nil {
		hook = func(string) {}
	}
	v, err := New(Options{Geometry: r.g, Size: r.vol.Size(), Devices: hookedSet{dm, hook}, Alloc: r.alloc, Stale: r.stale, ReadOnly: true, Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFollowSwitchesBetweenReads: a reader reads segment 0 from its slots;
// the writer moves slot 0 to a spare namespace and commits. A read caught
// in flight on the old slot (a stripe's) when the reader follows the move
// finishes there before Follow returns; every read after it comes from the new
// slot: the old one is overwritten with garbage (freed and reused) and the
// reader still reads the data, without touching the old namespace.
func TestFollowSwitchesBetweenReads(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, Chunk: 8 << 10, SlotSize: 32 << 10, Checksums: true}
	r := newRig(t, g, g.SegmentData(), rigOptions{namespaces: g.N() + 1})
	model := testutil.Pattern(int(g.SegmentData()), 3)
	mustWriteFlushed(t, r.vol, model, 0)
	old, _, _ := r.alloc.Lookup(ctx, 0)
	gt := newGate(r.devs[r.index(old[0].NS)])
	spare := r.names[g.N()]
	resolving := make(chan struct{}) // Follow opens the new slot, then switches
	rd := readerOf(t, r, old[0].NS, gt, EventListener{}, func(ns string) {
		if ns == spare {
			close(resolving)
		}
	})
	mustEqual(t, "reader before the move", mustRead(t, rd, 0, len(model)), model)

	to := SlotRef{NS: spare, Slot: 0}
	if err := r.alloc.Reserve(to); err != nil {
		t.Fatal(err)
	}
	if err := r.vol.MoveSlot(ctx, 0, 0, to, MoveOptions{Commit: func(ctx context.Context) error { return r.alloc.Replace(ctx, 0, 0, to) }}); err != nil {
		t.Fatal(err)
	}

	gt.armed.Store(true)
	readErr := make(chan error, 1)
	got := make([]byte, g.Chunk) // one stripe's shard 0: on slot 0
	go func() { readErr <- rd.ReadAt(ctx, got, 0) }()
	<-gt.entered // the read is in flight on the old slot
	followed := make(chan bool, 1)
	go func() {
		n, err := rd.Follow(ctx, 0, []SlotRef{to, old[1], old[2]})
		if err != nil || n != 1 {
			t.Errorf("Follow: %d slots switched, %v; want 1", n, err)
		}
		// The read's device IO ended before the read let go of the
		// segment (its return to the caller may come later).
		followed <- gt.left.Load()
	}()
	<-resolving
	close(gt.open)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "read in flight across the switch", got, model[:g.Chunk])
	if !<-followed {
		t.Fatal("Follow returned while a read of the old slot was in flight")
	}
	if refs := rd.CachedSlots()[0]; refs[0] != to {
		t.Fatalf("reader reads segment 0 from %v, want slot 0 at %v", refs, to)
	}

	// The old slot is freed and reused: garbage there must not matter.
	garbage := testutil.Pattern(int(g.SlotSize), 99)
	if err := r.mems[r.index(old[0].NS)].WriteAt(ctx, garbage, old[0].Slot*g.SlotSize); err != nil {
		t.Fatal(err)
	}
	r.devs[r.index(old[0].NS)].ResetStats()
	mustEqual(t, "reader after the switch", mustRead(t, rd, 0, len(model)), model)
	if n := r.devs[r.index(old[0].NS)].Stats().Reads; n != 0 {
		t.Errorf("%d reads of the old namespace after the switch", n)
	}
}

// TestFollowForgetsAndUnknown: Follow of a segment the reader never read
// does nothing (its first read looks it up); nil slots drop a cached one.
func TestFollowForgetsAndUnknown(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, Chunk: 8 << 10, SlotSize: 32 << 10}
	r := newRig(t, g, 2*g.SegmentData(), rigOptions{})
	if err := r.vol.WriteAt(ctx, testutil.Pattern(int(2*g.SegmentData()), 5), 0); err != nil {
		t.Fatal(err)
	}
	rd := readerOf(t, r, "", nil, EventListener{}, nil)
	mustRead(t, rd, 0, int(g.SegmentData()))
	refs, _, _ := r.alloc.Lookup(ctx, 1)
	if n, err := rd.Follow(ctx, 1, refs); n != 0 || err != nil {
		t.Fatalf("Follow of an uncached segment: %d, %v", n, err)
	}
	if _, err := rd.Follow(ctx, 0, nil); err != nil {
		t.Fatal(err)
	}
	if c := rd.CachedSlots(); len(c) != 0 {
		t.Fatalf("cached after forgetting: %v", c)
	}
	if _, err := rd.Follow(ctx, 0, []SlotRef{refs[0]}); err == nil {
		t.Fatal("Follow with a short placement succeeded")
	}
}

// TestReadOnlyReadNeverWrites: a block that fails its checksum is rebuilt
// for a read-only volume's read, which returns the data written, reports
// the block (healed: none) and writes nothing: the bad byte stays for the
// owner or a scrub. Writes and trims of a read-only volume fail.
func TestReadOnlyReadNeverWrites(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 4, M: 2, Chunk: 16 << 10, SlotSize: 64 << 10, Checksums: true}
	r := newRig(t, g, g.SegmentData(), rigOptions{})
	model := testutil.Pattern(int(g.SegmentData()), 7)
	mustWriteFlushed(t, r.vol, model, 0)
	refs, _, _ := r.alloc.Lookup(ctx, 0)
	// Flip a byte in data shard 1 of stripe 2.
	sl := refs[g.SlotOf(2, 1)]
	at := sl.Slot*g.SlotSize + 2*g.Chunk + 100
	b := make([]byte, 4096)
	mem := r.mems[r.index(sl.NS)]
	if err := mem.ReadAt(ctx, b, at/4096*4096); err != nil {
		t.Fatal(err)
	}
	b[at%4096] ^= 0x40
	if err := mem.WriteAt(ctx, b, at/4096*4096); err != nil {
		t.Fatal(err)
	}
	var reports []ChecksumInfo
	rd := readerOf(t, r, "", nil, EventListener{Checksum: func(c ChecksumInfo) { reports = append(reports, c) }}, nil)
	r.resetStats()
	mustEqual(t, "read-only read over a bad block", mustRead(t, rd, 0, len(model)), model)
	if s := r.stats(); s.Writes != 0 || s.Trims != 0 {
		t.Errorf("a read-only read wrote: %+v", s)
	}
	if st := rd.ChecksumStats(); st.Mismatches == 0 || st.Healed != 0 {
		t.Errorf("checksum stats %+v: want a mismatch and nothing healed", st)
	}
	if len(reports) == 0 || reports[0].NS != sl.NS || reports[0].Healed != 0 {
		t.Errorf("reports %+v: want the bad block on %s, not healed", reports, sl.NS)
	}
	after := make([]byte, 4096)
	if err := mem.ReadAt(ctx, after, at/4096*4096); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "the bad block, left for the owner", after, b)
	for what, err := range map[string]error{
		"write": rd.WriteAt(ctx, make([]byte, 4096), 0),
		"trim":  rd.Trim(ctx, 0, 4096),
	} {
		if !errors.Is(err, blockdev.ErrInvalid) {
			t.Errorf("%s of a read-only volume: %v, want ErrInvalid", what, err)
		}
	}
}
