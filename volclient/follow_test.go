package volclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/volume"
)

// slotChecker checks, again and again while moves run, that no reader
// reads from a slot that is free: it reads every allocation bitmap, then
// the slots every reader's volume reads from, then the bitmaps again, and
// counts a violation for a slot a reader reads from that was free both
// times (a slot freed and given to a new move between the two reads could
// not be filled, committed and followed in that window).
type slotChecker struct {
	store   *meta.Store
	readers []*Mapped
	checks  atomic.Int64
	bad     atomic.Int64
	first   atomic.Value // string: the first violation
}

func (c *slotChecker) free(ctx context.Context) (map[meta.SlotRef]bool, error) {
	nss, err := c.store.Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	out := map[meta.SlotRef]bool{}
	for _, n := range nss {
		a, err := c.store.Allocation(ctx, n.ID)
		if err != nil {
			return nil, err
		}
		for s := int64(1); s < a.Slots; s++ {
			if a.Bitmap[s/8]&(1<<(s%8)) == 0 {
				out[meta.SlotRef{NS: n.ID, Slot: s}] = true
			}
		}
	}
	return out, nil
}

func (c *slotChecker) check(ctx context.Context) error {
	before, err := c.free(ctx)
	if err != nil {
		return err
	}
	var reading []meta.SlotRef
	for _, r := range c.readers {
		for _, refs := range r.Volume.CachedSlots() {
			for _, ref := range refs {
				reading = append(reading, meta.SlotRef{NS: ref.NS, Slot: ref.Slot})
			}
		}
	}
	after, err := c.free(ctx)
	if err != nil {
		return err
	}
	c.checks.Add(1)
	for _, ref := range reading {
		if before[ref] && after[ref] {
			if c.bad.Add(1) == 1 {
				c.first.Store(fmt.Sprintf("a reader reads from free slot %s/%d", ref.NS, ref.Slot))
			}
		}
	}
	return nil
}

// verifyReads verifies random ranges of m against model until stop, counting
// reads; a failed or wrong read fails t.
func verifyReads(t *testing.T, m *Mapped, model []byte, seed int64, reads *atomic.Int64, turns chan struct{}, stop <-chan struct{}) {
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		case turns <- struct{}{}:
		}
		n := int64(rng.Intn(32)+1) * 4096
		off := rng.Int63n((int64(len(model))-n)/4096+1) * 4096
		got := make([]byte, n)
		err := m.Volume.ReadAt(ctx, got, off)
		<-turns
		if err != nil {
			t.Errorf("reader: read %d+%d: %v", off, n, err)
			return
		}
		if !bytes.Equal(got, model[off:off+n]) {
			t.Errorf("reader: read %d+%d returned bytes that were never written there", off, n)
			return
		}
		reads.Add(1)
	}
}

// heldBack checks the volume's state while reader r (r00) is held back
// from switching segment seg away from its slot on namespace ns: once every
// other reader has applied the move's commit, the old slot is still
// reserved (FinishMove names r00 alone as behind), r reads from it, and it
// is allocated. It returns the old slot.
func heldBack(t *testing.T, store *meta.Store, r *Mapped, seg int64, ns string) meta.SlotRef {
	t.Helper()
	ctx := context.Background()
	vm, err := store.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	var behind *meta.ReadersBehindError
	waitUntil(t, "every reader but r00 following the commit", func() bool {
		err := vm.FinishMove(ctx, seg)
		if err == nil || !errors.As(err, &behind) {
			t.Fatalf("segment %d: finishing the move while r00 has not switched: %v (the old slot would be freed under it)", seg, err)
		}
		return len(behind.Readers) == 1
	})
	if !strings.HasPrefix(behind.Readers[0], "r00 ") {
		t.Fatalf("readers behind: %v, want r00 alone", behind.Readers)
	}
	rec, err := vm.Segment(ctx, seg)
	if err != nil || rec.Move == nil || !rec.Move.Committed() {
		t.Fatalf("segment %d: %+v, %v: want its move committed and unfinished", seg, rec, err)
	}
	old := *rec.Move.From
	if old.NS != ns {
		t.Fatalf("segment %d: the committed move comes from %v, not from the dead %s", seg, old, ns)
	}
	reading := false
	for _, ref := range r.Volume.CachedSlots()[seg] {
		reading = reading || ref == volume.SlotRef{NS: old.NS, Slot: old.Slot}
	}
	if !reading {
		t.Fatalf("r00 does not read segment %d from %v while held back", seg, old)
	}
	a, err := store.Allocation(ctx, old.NS)
	if err != nil || a.Bitmap[old.Slot/8]&(1<<(old.Slot%8)) == 0 {
		t.Fatalf("the old slot %v is free while r00 reads it (%v)", old, err)
	}
	t.Logf("segment %d: its old slot %s/%d stays reserved while r00 lags; the other readers switched", seg, old.NS, old.Slot)
	return old
}

// TestReadersFollowRebuild is the read-only mapping's rebuild: a written
// 4+2 volume with checksums on eight in-process NVMe/TCP targets (real
// sockets) and embedded etcd is mapped read-only by 20 readers, which
// verify random ranges continuously; nobody maps it read-write. A target
// holding shards is killed; the controller (runner and volclient mover, as
// `nvstripe controller` runs them) marks its namespace out and rebuilds
// the volume with the readers attached. Meanwhile a checker asserts, again
// and again, that no reader reads from a free slot (the old slots are
// freed only after every reader switched). At the end: no reader saw an
// error or a wrong byte, every reader reads from the new slots only, the
// volume is fully redundant on distinct hosts, no slot leaked, and a fresh
// read-only mapping reads back everything written.
func TestReadersFollowRebuild(t *testing.T) {
	if testing.Short() {
		t.Skip("twenty mappings over eight targets and a rebuild; not in -short")
	}
	const size, readers = 24 << 20, 20
	tc := newTestCluster(t, 8, 64<<20, 4<<20)
	ctx := context.Background()
	if _, err := tc.store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: size,
		Layout: meta.Layout{K: 4, M: 2, Chunk: 64 << 10, Checksum: meta.ChecksumCRC32C}}); err != nil {
		t.Fatal(err)
	}
	model := make([]byte, size)
	rand.New(rand.NewSource(11)).Read(model)
	writeOnce(ctx, t, tc.store, "v", model) // unmapped: only readers from now on

	// Reader r00 is held back at its first switch until released.
	held, release := make(chan int64, 1), make(chan struct{})
	var holdOnce, releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	var ms []*Mapped
	for i := range readers {
		o := testOpenOptions(fmt.Sprintf("r%02d", i))
		o.ReadOnly = true
		if i == 0 {
			o.followHold = func(seg int64) { holdOnce.Do(func() { held <- seg; <-release }) }
		}
		m, err := OpenVolume(ctx, tc.store, "v", o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { let(); m.Close(context.Background()) })
		ms = append(ms, m)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	reads := make([]atomic.Int64, readers)
	// Four reads in flight at a time, taking turns: every reader verifies
	// all along without starving the leases' renewals on a small machine.
	turns := make(chan struct{}, 4)
	for i, m := range ms {
		wg.Go(func() { verifyReads(t, m, model, int64(i), &reads[i], turns, stop) })
	}
	chk := &slotChecker{store: tc.store, readers: ms}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := chk.check(ctx); err != nil {
				t.Errorf("slot check: %v", err)
				return
			}
		}
	})
	waitUntil(t, "every reader verifying", func() bool {
		for i := range reads {
			if reads[i].Load() < 5 {
				return false
			}
		}
		return true
	})

	victim := tc.hostWithShards(t, ms[0])
	victimNS := fmt.Sprintf("h%d-n1", victim)
	tc.targets[victim].Close()
	t.Logf("killed target h%d", victim)
	// The controller as `nvstripe controller` runs it, with its default
	// lease TTLs (this machine may be busy).
	mover := NewTaskMover(tc.store, OpenOptions{Holder: "ctl",
		Namespaces: NamespaceOptions{ControllerLossTimeout: time.Second, ConnectTimeout: 2 * time.Second}})
	r, err := controller.NewRunner(controller.RunnerConfig{Store: tc.store, Holder: "ctl", Mover: mover,
		Interval: 100 * time.Millisecond, Decide: decide.Config{OutAfter: time.Second},
		Probe: controller.ProbeTCP(200 * time.Millisecond), Health: health.TrackerConfig{Grace: 300 * time.Millisecond},
		Logf: func(f string, a ...any) { t.Logf("controller: "+f, a...) }})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopCtl := context.WithCancel(ctx)
	ctlDone := make(chan struct{})
	go func() { defer close(ctlDone); r.Run(rctx) }()
	t.Cleanup(func() { stopCtl(); <-ctlDone })
	seg := <-held
	oldSlot := heldBack(t, tc.store, ms[0], seg, victimNS)
	let()
	waitRebuilt(t, tc.store, victimNS)
	if a, err := tc.store.Allocation(ctx, oldSlot.NS); err != nil || a.Bitmap[oldSlot.Slot/8]&(1<<(oldSlot.Slot%8)) != 0 {
		t.Errorf("the old slot %v is still allocated after r00 followed (%v)", oldSlot, err)
	}
	// Every reader goes on verifying after the rebuild, from the new slots.
	marks := make([]int64, readers)
	for i := range reads {
		marks[i] = reads[i].Load()
	}
	waitUntil(t, "every reader verifying after the rebuild", func() bool {
		for i := range reads {
			if reads[i].Load() < marks[i]+5 {
				return false
			}
		}
		return true
	})
	if t.Failed() {
		t.FailNow()
	}
	for i, m := range ms {
		for seg, refs := range m.Volume.CachedSlots() {
			for _, ref := range refs {
				if ref.NS == victimNS {
					t.Errorf("reader %d still reads segment %d from the dead namespace %s", i, seg, victimNS)
				}
			}
		}
	}
	if n := chk.checks.Load(); n == 0 {
		t.Error("the slot checker never ran")
	}
	if n := chk.bad.Load(); n > 0 {
		t.Errorf("%d times a reader read from a free slot; first: %v", n, chk.first.Load())
	}
	t.Logf("%d slot checks, none found a reader on a free slot", chk.checks.Load())
	tc.checkDistinctHosts(t, ms[0])
	checkNoLeakedSlots(t, tc.store)
	a, err := tc.store.Allocation(ctx, victimNS)
	if err != nil || a.Used != 0 {
		t.Errorf("dead namespace %s keeps %v slots (%v): its old slots were not all freed", victimNS, a, err)
	}
	o := testOpenOptions("fresh")
	o.ReadOnly = true
	fresh, err := OpenVolume(ctx, tc.store, "v", o)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(ctx)
	verifyThrough(t, fresh.Volume, model, "a fresh read-only mapping after the rebuild")
}

// TestFollowerRelistsAfterBrokenWatch: a reader's watch of the segment map
// breaks (etcd compacted the history it resumes from) while a move of the
// mover commits. The follower lists the map again, switches the reader to
// the new slot and publishes the list's revision, and the mover, which
// waited for it, releases the old slot.
func TestFollowerRelistsAfterBrokenWatch(t *testing.T) {
	const size = 16 << 20
	tc := newTestCluster(t, 7, 64<<20, 4<<20)
	ctx := context.Background()
	if _, err := tc.store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: size, Layout: meta.Layout{K: 4, M: 2, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	model := make([]byte, size)
	rand.New(rand.NewSource(5)).Read(model)
	writeOnce(ctx, t, tc.store, "v", model)
	// The mapping's own follower is held at its first switch for good: the
	// follower under test, on the same volume and lease, does the work.
	release := make(chan struct{})
	o := testOpenOptions("reader")
	o.ReadOnly = true
	o.followHold = func(int64) { <-release }
	r, err := OpenVolume(ctx, tc.store, "v", o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	defer close(release)
	verifyThrough(t, r.Volume, model, "reader before the move")
	var logs strings.Builder
	var logMu sync.Mutex
	f, rev, err := newFollower(ctx, r.Map, r.Owner, func(format string, a ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(&logs, format+"\n", a...)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.vol = r.Volume

	mo := testOpenOptions("ctl")
	mo.Mover = true
	mv, err := OpenVolume(ctx, tc.store, "v", mo)
	if err != nil {
		t.Fatal(err)
	}
	defer mv.Close(ctx)
	moved := make(chan error, 1)
	go func() { moved <- mv.MoveShard(ctx, 0, 0, "", nil) }()
	var to meta.SlotRef
	waitUntil(t, "the move committed", func() bool {
		rec, err := mv.Map.Segment(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Move != nil && rec.Move.Committed() {
			to = rec.Move.To
			return true
		}
		return false
	})
	cli := tc.etcd.Client()
	metatest.CompactClient(t, cli)
	_ = cli.Close()
	fctx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	go f.run(fctx, rev)
	select {
	case err := <-moved:
		if err != nil {
			t.Fatalf("move: %v", err)
		}
	case <-time.After(2 * time.Minute): // a hang guard
		t.Fatal("the mover still waits for the reader after its watch broke")
	}
	if got := r.Volume.CachedSlots()[0][0]; got != (volume.SlotRef{NS: to.NS, Slot: to.Slot}) {
		t.Fatalf("the reader reads slot 0 from %v, want the new %v", got, to)
	}
	logMu.Lock()
	said := logs.String()
	logMu.Unlock()
	if !strings.Contains(said, "listing it again") {
		t.Errorf("the follower did not say it listed the map again: %q", said)
	}
	verifyThrough(t, r.Volume, model, "reader after the move")
	checkNoLeakedSlots(t, tc.store)
}
