package volclient

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
)

// TestOpenRefusesNegativeRecheckInterval: a negative RecheckInterval is
// refused (blockdev.ErrInvalid, naming the option) before ownership is
// taken, so that a good open follows at once. The old OpenVolume opened the
// volume and its upkeep goroutine panicked in time.NewTicker.
func TestOpenRefusesNegativeRecheckInterval(t *testing.T) {
	tc := newTestCluster(t, 6, 64<<20, 4<<20)
	ctx := context.Background()
	if _, err := tc.store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: 4 << 20, Layout: meta.Layout{K: 4, M: 2, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	o := testOpenOptions("node1")
	o.RecheckInterval = -time.Second
	m, err := OpenVolume(ctx, tc.store, "v", o)
	if m != nil {
		m.Close(ctx)
	}
	if !errors.Is(err, blockdev.ErrInvalid) || !strings.Contains(err.Error(), "RecheckInterval -1s: negative") {
		t.Fatalf("open with RecheckInterval -1s: %v, want blockdev.ErrInvalid naming it", err)
	}
	o.RecheckInterval = 0
	m, err = OpenVolume(ctx, tc.store, "v", o)
	if err != nil {
		t.Fatalf("open after the refused one: %v", err)
	}
	m.Close(ctx)
}

// TestOpenRefusesBadNamespaceLimits: OpenVolume refuses a Namespaces
// count or timeout the initiator would refuse for every namespace
// (NamespaceOptions.checkLimits), before ownership is taken, so that a
// good open follows at once. The old OpenVolume went on to connect.
func TestOpenRefusesBadNamespaceLimits(t *testing.T) {
	tc := newTestCluster(t, 6, 64<<20, 4<<20)
	ctx := context.Background()
	if _, err := tc.store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: 4 << 20, Layout: meta.Layout{K: 4, M: 2, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	o := testOpenOptions("node1")
	o.Namespaces.IOQueues = -1
	m, err := OpenVolume(ctx, tc.store, "v", o)
	if m != nil {
		m.Close(ctx)
	}
	if !errors.Is(err, blockdev.ErrInvalid) || !strings.Contains(err.Error(), "IOQueues -1: give 1 to 128") {
		t.Fatalf("open with IOQueues -1: %v, want blockdev.ErrInvalid naming it", err)
	}
	o.Namespaces.IOQueues = 0
	m, err = OpenVolume(ctx, tc.store, "v", o)
	if err != nil {
		t.Fatalf("open after the refused one: %v", err)
	}
	m.Close(ctx)
}
