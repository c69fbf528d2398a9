package agent

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
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
	nqn := fmt.Sprintf("nqn.2026-11.io.nvstripe:test-t%d", 5)
	t2, err := target.New(target.Config{
		Subsystems: []target.SubsystemConfig{{NQN: nqn, Namespaces: []target.NamespaceConfig{{NSID: 1, Device: mem}},
			AllowedHosts: []string{initiator.DefaultHostNQN}}},
		Listeners: []target.ListenerConfig{{Address: addr}},
	})
	if err == nil {
		err = t2.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
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
