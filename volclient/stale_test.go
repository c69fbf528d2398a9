package volclient

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
)

// staleSize is the volume size of the stale-slot tests.
const staleSize = 16 << 20

// staleFixture is a 4+2 volume "v" of staleSize over six userspace targets,
// written with random data and flushed. The sixth (test target 5) serves
// mem at addr, so that it can be stopped and served again.
type staleFixture struct {
	tc   *testCluster
	m    *Mapped
	tgt  *target.Target
	addr string
	mem  *blockdev.Mem
	want []byte // the volume's contents as written
}

func newStaleFixture(t *testing.T, o OpenOptions) *staleFixture {
	t.Helper()
	f := &staleFixture{tc: newTestCluster(t, 5, 64<<20, 4<<20)}
	c, err := f.tc.store.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.mem, _ = blockdev.NewMem(64<<20, 4096)
	f.tgt, _ = volclienttest.ServeNamespace(t, f.tc.store, c, 5, f.mem)
	f.addr = f.tgt.Addr(0)
	f.m = f.tc.openVolume(t, staleSize, 64<<10, o)
	f.want = make([]byte, staleSize)
	f.overwrite(t, f.m, 1, staleSize)
	return f
}

// overwrite writes fresh random data (from seed) over [0, n) through m,
// flushes, and records it in want.
func (f *staleFixture) overwrite(t *testing.T, m *Mapped, seed int64, n int) {
	t.Helper()
	ctx := context.Background()
	rand.New(rand.NewSource(seed)).Read(f.want[:n])
	if err := m.Volume.WriteAt(ctx, f.want[:n], 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Volume.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// restart serves mem again on the stopped target's address.
func (f *staleFixture) restart(t *testing.T) { volclienttest.StartTarget(t, 5, f.addr, f.mem) }

// missWrites stops the sixth target, overwrites [0, n) and unmaps the
// volume: the target's slots hold old data and are marked stale.
func (f *staleFixture) missWrites(t *testing.T, n int) {
	t.Helper()
	f.tgt.Close()
	f.overwrite(t, f.m, 2, n)
	if err := f.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// openReadOnly maps the volume read-only, probing down namespaces every
// 100 ms; it is unmapped when the test ends.
func (f *staleFixture) openReadOnly(t *testing.T) *Mapped {
	t.Helper()
	o := testOpenOptions("r")
	o.ReadOnly, o.RecheckInterval, o.Logf = true, 100*time.Millisecond, t.Logf
	m, err := OpenVolume(context.Background(), f.tc.store, "v", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// readsWant checks that m reads the whole volume as want.
func (f *staleFixture) readsWant(t *testing.T, m *Mapped, what string) {
	t.Helper()
	got := make([]byte, staleSize)
	if err := m.Volume.ReadAt(context.Background(), got, 0); err != nil || !bytes.Equal(got, f.want) {
		t.Fatalf("%s: err %v, data matches %v", what, err, bytes.Equal(got, f.want))
	}
}

// verifyWithTwoDown stops two other targets and checks that m reads want.
func (f *staleFixture) verifyWithTwoDown(t *testing.T, m *Mapped) {
	t.Helper()
	f.tc.targets[0].Close()
	f.tc.targets[1].Close()
	f.readsWant(t, m, "with two other targets down")
}

// TestReopenAfterTargetReturns: a target is down while the volume is
// overwritten and flushed, and comes back; the next owner must read the last
// writes (not the old data that target still holds), and rebuilds the slots
// that missed them in place, after which the marks in etcd are gone and the
// data survives two other targets going.
func TestReopenAfterTargetReturns(t *testing.T) {
	ctx := context.Background()
	f := newStaleFixture(t, testOpenOptions("a"))
	f.missWrites(t, staleSize)
	if marks, err := f.m.Map.Stale(ctx); err != nil || len(marks) == 0 {
		t.Fatalf("stale marks after writes that missed a target: %v, %v", marks, err)
	}
	f.restart(t)
	m2, err := OpenVolume(ctx, f.tc.store, "v", testOpenOptions("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(ctx)
	got := make([]byte, staleSize)
	if err := m2.Volume.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, f.want) {
		n := 0
		for i := 0; i < staleSize; i += 4096 {
			if !bytes.Equal(got[i:i+4096], f.want[i:i+4096]) {
				n++
			}
		}
		t.Fatalf("after reopen, %d of %d blocks differ from the last write", n, staleSize/4096)
	}
	waitUntil(t, "the stale marks cleared by the background repair", func() bool {
		marks, err := m2.Map.Stale(ctx)
		return err == nil && len(marks) == 0
	})
	f.verifyWithTwoDown(t, m2)
}

// TestTargetReturnsWhileMapped: a target holding shards is down while a
// mapped volume is written, and comes back while it is still mapped, either
// after it was connected (down mid-open) or never connected in this open
// (down at open). The owner must put its namespace back into use and rebuild
// what it missed on its own, without a reopen: afterwards the stale marks are
// gone and the data survives two other targets going.
func TestTargetReturnsWhileMapped(t *testing.T) {
	for _, downAtOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("down-at-open=%v", downAtOpen), func(t *testing.T) {
			ctx := context.Background()
			o := testOpenOptions("a")
			o.RecheckInterval = 100 * time.Millisecond
			o.Logf = t.Logf
			f := newStaleFixture(t, o)
			m := f.m
			if downAtOpen {
				if err := m.Close(ctx); err != nil {
					t.Fatal(err)
				}
				f.tgt.Close()
				var err error
				if m, err = OpenVolume(ctx, f.tc.store, "v", o); err != nil {
					t.Fatal(err)
				}
			} else {
				f.tgt.Close()
			}
			defer m.Close(ctx)
			f.overwrite(t, m, 2, staleSize/2)
			if len(m.Volume.DownNamespaces()) != 1 {
				t.Fatalf("down namespaces after writing around a stopped target: %v", m.Volume.DownNamespaces())
			}
			f.restart(t)
			waitUntil(t, "the namespace back in use and the slots it missed rebuilt", func() bool {
				marks, err := m.Map.Stale(ctx)
				return len(m.Volume.DownNamespaces()) == 0 && err == nil && len(marks) == 0
			})
			f.verifyWithTwoDown(t, m)
		})
	}
}

// TestReadOnlyReinstates: a read-only mapping uses a namespace again once
// its target answers, whether the target stopped while mapped or before the
// open; without that, every read of its shards stays degraded until the
// volume is mapped again. With two other targets stopped, the data can only
// be read with the returned namespace's shards.
func TestReadOnlyReinstates(t *testing.T) {
	for _, downAtOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("down-at-open=%v", downAtOpen), func(t *testing.T) {
			f := newStaleFixture(t, testOpenOptions("a"))
			if err := f.m.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if downAtOpen {
				f.tgt.Close()
			}
			m := f.openReadOnly(t)
			f.tgt.Close()
			f.readsWant(t, m, "degraded read")
			if len(m.Volume.DownNamespaces()) != 1 {
				t.Fatalf("down namespaces after reading around a stopped target: %v", m.Volume.DownNamespaces())
			}
			f.restart(t)
			waitUntil(t, "the namespace back in use", func() bool { return len(m.Volume.DownNamespaces()) == 0 })
			f.verifyWithTwoDown(t, m)
		})
	}
}

// TestReadOnlyReinstateKeepsStaleSlotsUnused: the namespace missed writes
// (its slots are marked stale) before a read-only mapping opened. When it
// answers again the mapping reads from it, but not from the stale slots:
// with two other targets stopped a read must fail rather than return the
// old data those slots hold.
func TestReadOnlyReinstateKeepsStaleSlotsUnused(t *testing.T) {
	ctx := context.Background()
	f := newStaleFixture(t, testOpenOptions("a"))
	f.missWrites(t, staleSize/2)
	m := f.openReadOnly(t)
	f.readsWant(t, m, "degraded read")
	f.restart(t)
	waitUntil(t, "the namespace back in use", func() bool { return len(m.Volume.DownNamespaces()) == 0 })
	f.tc.targets[0].Close()
	f.tc.targets[1].Close()
	got := make([]byte, staleSize/2)
	if err := m.Volume.ReadAt(ctx, got, 0); err == nil {
		t.Fatalf("read of stripes with only the stale slots as the k-th shard succeeded; data matches %v", bytes.Equal(got, f.want[:staleSize/2]))
	}
	if marks, err := m.Map.Stale(ctx); err != nil || len(marks) == 0 {
		t.Fatalf("a read-only mapping cleared stale marks: %v, %v", marks, err)
	}
}

// TestControllerRepairsUnmappedStale: slots missed writes while their target
// was down, the volume was unmapped, and the target came back. Nobody maps
// the volume, so the controller must open it and rebuild them: `admin
// status` health counts them until then, and afterwards the marks are gone,
// nobody owns the volume, and the data survives two other targets going.
func TestControllerRepairsUnmappedStale(t *testing.T) {
	ctx := context.Background()
	f := newStaleFixture(t, testOpenOptions("a"))
	f.missWrites(t, staleSize/2)
	f.restart(t)
	snap, err := controller.LoadSnapshot(ctx, f.tc.store)
	if err != nil {
		t.Fatal(err)
	}
	if h := snap.Health()[0]; h.Stale == 0 || h.Status() == "healthy" {
		t.Fatalf("health with slots that missed writes: %+v (%s)", h, h.Status())
	}
	runController(t, f.tc.store)
	waitUntil(t, "the controller to rebuild the stale slots and let the volume go", func() bool {
		marks, err := f.m.Map.Stale(ctx)
		owners, oerr := f.tc.store.Owners(ctx, "v")
		return err == nil && oerr == nil && len(marks) == 0 && len(owners) == 0
	})
	m2, err := OpenVolume(ctx, f.tc.store, "v", testOpenOptions("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(ctx)
	f.verifyWithTwoDown(t, m2)
}
