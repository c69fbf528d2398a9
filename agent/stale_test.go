package agent

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// TestReopenAfterTargetReturns: a target is down while the volume is
// overwritten and flushed, and comes back; the next owner must read the last
// writes (not the old data that target still holds), and rebuilds the slots
// that missed them in place, after which the marks in etcd are gone and the
// data survives two other targets going.
func TestReopenAfterTargetReturns(t *testing.T) {
	const size = 16 << 20
	tc := newTestCluster(t, 5, 64<<20, 4<<20)
	ctx := context.Background()
	c, _ := tc.store.Cluster(ctx)
	mem, _ := blockdev.NewMem(64<<20, 4096)
	tgt, _ := serveNamespace(t, tc.store, c, 5, mem)
	m := tc.openVolume(t, size, 64<<10, testOpenOptions("a"))
	a := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(a)
	if err := m.Volume.WriteAt(ctx, a, 0); err != nil {
		t.Fatal(err)
	}
	m.Volume.Flush(ctx)
	addr := tgt.Addr(0)
	tgt.Close()
	b := make([]byte, size)
	rand.New(rand.NewSource(2)).Read(b)
	if err := m.Volume.WriteAt(ctx, b, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Volume.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if marks, err := m.Map.Stale(ctx); err != nil || len(marks) == 0 {
		t.Fatalf("stale marks after writes that missed a target: %v, %v", marks, err)
	}
	restartTarget(t, 5, addr, mem)
	m2, err := OpenVolume(ctx, tc.store, "v", testOpenOptions("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(ctx)
	got := make([]byte, size)
	if err := m2.Volume.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b) {
		n := 0
		for i := 0; i < size; i += 4096 {
			if !bytes.Equal(got[i:i+4096], b[i:i+4096]) {
				n++
			}
		}
		t.Fatalf("after reopen, %d of %d blocks differ from the last write", n, size/4096)
	}
	waitFor(t, "the stale marks cleared by the background repair", func() bool {
		marks, err := m2.Map.Stale(ctx)
		return err == nil && len(marks) == 0
	})
	tc.targets[0].Close()
	tc.targets[1].Close()
	if err := m2.Volume.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("after the repair, with two other targets down: err %v, data matches %v", err, bytes.Equal(got, b))
	}
}

// restartTarget serves dev again as the namespace of test target i (see
// serveNamespace) on addr, the address it had.
func restartTarget(t *testing.T, i int, addr string, dev blockdev.Device) {
	t.Helper()
	nqn := fmt.Sprintf("nqn.2026-11.io.nvstripe:test-t%d", i)
	tgt, err := target.New(target.Config{
		Subsystems: []target.SubsystemConfig{{NQN: nqn, Namespaces: []target.NamespaceConfig{{NSID: 1, Device: dev}},
			AllowedHosts: []string{initiator.DefaultHostNQN}}},
		Listeners: []target.ListenerConfig{{Address: addr}},
	})
	if err == nil {
		err = tgt.Start(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
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
			const size = 16 << 20
			tc := newTestCluster(t, 5, 64<<20, 4<<20)
			ctx := context.Background()
			c, _ := tc.store.Cluster(ctx)
			mem, _ := blockdev.NewMem(64<<20, 4096)
			tgt, _ := serveNamespace(t, tc.store, c, 5, mem)
			addr := tgt.Addr(0)
			o := testOpenOptions("a")
			o.RecheckInterval = 100 * time.Millisecond
			o.Logf = t.Logf
			m := tc.openVolume(t, size, 64<<10, o)
			want := make([]byte, size)
			rand.New(rand.NewSource(1)).Read(want)
			if err := m.Volume.WriteAt(ctx, want, 0); err != nil {
				t.Fatal(err)
			}
			if err := m.Volume.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if downAtOpen {
				if err := m.Close(ctx); err != nil {
					t.Fatal(err)
				}
				tgt.Close()
				var err error
				if m, err = OpenVolume(ctx, tc.store, "v", o); err != nil {
					t.Fatal(err)
				}
			} else {
				tgt.Close()
			}
			defer m.Close(ctx)
			rand.New(rand.NewSource(2)).Read(want[:size/2])
			if err := m.Volume.WriteAt(ctx, want[:size/2], 0); err != nil {
				t.Fatal(err)
			}
			if err := m.Volume.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if len(m.Volume.DownNamespaces()) != 1 {
				t.Fatalf("down namespaces after writing around a stopped target: %v", m.Volume.DownNamespaces())
			}
			restartTarget(t, 5, addr, mem)
			waitFor(t, "the namespace back in use and the slots it missed rebuilt", func() bool {
				marks, err := m.Map.Stale(ctx)
				return len(m.Volume.DownNamespaces()) == 0 && err == nil && len(marks) == 0
			})
			tc.targets[0].Close()
			tc.targets[1].Close()
			got := make([]byte, size)
			if err := m.Volume.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("with two other targets down: err %v, data matches %v", err, bytes.Equal(got, want))
			}
		})
	}
}

// TestControllerRepairsUnmappedStale: slots missed writes while their target
// was down, the volume was unmapped, and the target came back. Nobody maps
// the volume, so the controller must open it and rebuild them: `admin
// status` health counts them until then, and afterwards the marks are gone,
// nobody owns the volume, and the data survives two other targets going.
func TestControllerRepairsUnmappedStale(t *testing.T) {
	const size = 16 << 20
	tc := newTestCluster(t, 5, 64<<20, 4<<20)
	ctx := context.Background()
	c, _ := tc.store.Cluster(ctx)
	mem, _ := blockdev.NewMem(64<<20, 4096)
	tgt, _ := serveNamespace(t, tc.store, c, 5, mem)
	m := tc.openVolume(t, size, 64<<10, testOpenOptions("a"))
	want := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(want)
	if err := m.Volume.WriteAt(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	m.Volume.Flush(ctx)
	addr := tgt.Addr(0)
	tgt.Close()
	rand.New(rand.NewSource(2)).Read(want[:size/2])
	if err := m.Volume.WriteAt(ctx, want[:size/2], 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	restartTarget(t, 5, addr, mem)
	snap, err := controller.LoadSnapshot(ctx, tc.store)
	if err != nil {
		t.Fatal(err)
	}
	if h := snap.Health()[0]; h.Stale == 0 || h.Status() == "healthy" {
		t.Fatalf("health with slots that missed writes: %+v (%s)", h, h.Status())
	}
	runController(t, tc.store)
	waitFor(t, "the controller to rebuild the stale slots and let the volume go", func() bool {
		marks, err := m.Map.Stale(ctx)
		owners, oerr := tc.store.Owners(ctx, "v")
		return err == nil && oerr == nil && len(marks) == 0 && len(owners) == 0
	})
	tc.targets[0].Close()
	tc.targets[1].Close()
	m2, err := OpenVolume(ctx, tc.store, "v", testOpenOptions("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(ctx)
	got := make([]byte, size)
	if err := m2.Volume.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("with two other targets down: err %v, data matches %v", err, bytes.Equal(got, want))
	}
}
