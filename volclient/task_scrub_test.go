package volclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
)

// TestScrubTaskCountsOnlyItsOwn: a checksummed 2+1 volume of two segments
// has one bad data block in segment 0 (healable) and a row of segment 1
// with both data blocks bad (unhealable), which a reader reads over and
// over while the scrub task runs. Each read finds the two bad blocks
// again (the volume's ChecksumStats count them every time); the scrub
// task counts what it read itself, once: three blocks bad, one healed,
// two left bad. (It counted the reader's finds as its own when it took
// the difference of the volume's counters around each segment.)
func TestScrubTaskCountsOnlyItsOwn(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20, 4<<20)
	ctx := context.Background()
	lay := meta.Layout{K: 2, M: 1, Chunk: 64 << 10, Checksum: meta.ChecksumCRC32C}
	size := 2 * lay.Geometry(4<<20).SegmentData()
	if _, err := tc.store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: size, Layout: lay}); err != nil {
		t.Fatal(err)
	}
	// A minute for the lease and the namespaces: no timeout is under
	// test, and a stall of this process on loaded cores must not fence
	// the volume or take a namespace out of use (reads would fail with
	// another class than ErrCorrupt).
	m, err := OpenVolume(ctx, tc.store, "v", OpenOptions{Holder: "node1", LeaseTTL: time.Minute,
		Namespaces: NamespaceOptions{ControllerLossTimeout: time.Minute, ConnectTimeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	data := make([]byte, size)
	rand.New(rand.NewSource(7)).Read(data)
	if err := m.Volume.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Volume.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	g := m.Volume.Geometry()
	tc.flipBlock(t, m, 0, 1, 0, 2)
	tc.flipBlock(t, m, 1, 0, 0, 0)
	tc.flipBlock(t, m, 1, 0, 1, 0)

	var reads atomic.Int64
	stop := make(chan struct{})
	readerDone := make(chan error, 1)
	go func() { readerDone <- readCorrupt(m, g.SegmentData(), stop, &reads) }()
	testutil.WaitFor(t, "the reader to find the bad row", func() bool { return reads.Load() > 0 })

	var lines []string
	logf := func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) } // one scrub: one goroutine logs
	s := &taskServer{m: m, store: tc.store, o: TaskOptions{Holder: "node1", ProgressEvery: time.Hour, Logf: logf}, busy: map[int64]bool{}}
	rec := putScrubTask(t, tc.store, "node1")
	id := rec.ID
	s.startScrub(ctx, rec)
	s.wg.Wait()
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	got, err := tc.store.Task(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	st := m.Volume.ChecksumStats()
	t.Logf("reads of the bad row: %d; volume counters %+v; log %q", reads.Load(), st, lines)
	if got.State != meta.TaskDone || got.Found != 3 || got.Healed != 1 || got.Unhealed != 2 || got.Parity != 0 || got.Done != 2 {
		t.Fatalf("scrub task %+v, want done over 2 segments with 3 blocks bad, 1 healed, 2 left bad", got)
	}
	if st.Mismatches <= 3 {
		t.Fatalf("volume counters %+v: the reader's finds are not counted, so this test shows nothing", st)
	}
	want := []string{
		"volume v: scrub segment 0: 1 blocks bad, 1 healed, 0 left bad, 0 parity chunks rewritten, 0 blocks unsettled",
		"volume v: scrub segment 1: 2 blocks bad, 0 healed, 2 left bad, 0 parity chunks rewritten, 0 blocks unsettled",
	}
	for _, w := range want {
		if !containsLine(lines, w) {
			t.Errorf("log %q lacks %q", lines, w)
		}
	}
}

// readCorrupt reads the first block of segment 1 (at off) until stop
// closes, counting the reads in n; each must fail with class ErrCorrupt.
func readCorrupt(m *Mapped, off int64, stop <-chan struct{}, n *atomic.Int64) error {
	b := make([]byte, 4096)
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := m.Volume.ReadAt(context.Background(), b, off); !errors.Is(err, blockdev.ErrCorrupt) {
			return fmt.Errorf("read of a row with both data blocks bad: %v, want class ErrCorrupt", err)
		}
		n.Add(1)
	}
}

func containsLine(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

// flipBlock flips a bit of block row of shard sh of stripe stripe of
// segment seg in the memory behind its namespace.
func (tc *testCluster) flipBlock(t *testing.T, m *Mapped, seg, stripe int64, sh int, row int64) {
	t.Helper()
	ctx := context.Background()
	g := m.Volume.Geometry()
	refs, ok, err := segmentMap{m.Map}.Lookup(ctx, seg)
	if err != nil || !ok {
		t.Fatalf("segment %d: %v %v", seg, ok, err)
	}
	ref := refs[g.SlotOf(stripe, sh)]
	ns, err := tc.store.Namespace(ctx, ref.NS)
	if err != nil {
		t.Fatal(err)
	}
	var host int
	if _, err := fmt.Sscanf(ns.Host, "h%d", &host); err != nil {
		t.Fatal(err)
	}
	at := ref.Slot*g.SlotSize + stripe*g.Chunk + row*4096
	b := make([]byte, 4096)
	mem := tc.mems[host]
	if err := mem.ReadAt(ctx, b, at); err != nil {
		t.Fatal(err)
	}
	b[100] ^= 1
	if err := mem.WriteAt(ctx, b, at); err != nil {
		t.Fatal(err)
	}
}
