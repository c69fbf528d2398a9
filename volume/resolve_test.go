package volume

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// gatedSet is a DeviceSet whose namespace "slow" resolves only once release
// is closed (a target being dialled), or fails when the caller's context
// ends; entered is closed when its resolution starts.
type gatedSet struct {
	DeviceMap
	entered, release chan struct{}
}

func (g *gatedSet) Device(ctx context.Context, ns string) (blockdev.Device, error) {
	if ns == "slow" {
		select {
		case <-g.entered:
		default:
			close(g.entered)
		}
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, fmt.Errorf("namespace %s: dialling: %w", ns, ctx.Err())
		}
	}
	return g.DeviceMap.Device(ctx, ns)
}

// fixedAlloc is an Allocator with fixed placement: it allocates nothing.
type fixedAlloc map[int64][]SlotRef

func (a fixedAlloc) Lookup(_ context.Context, seg int64) ([]SlotRef, bool, error) {
	refs, ok := a[seg]
	return refs, ok, nil
}
func (a fixedAlloc) Allocate(_ context.Context, seg int64) ([]SlotRef, error) {
	return nil, fmt.Errorf("segment %d: fixed placement: %w", seg, blockdev.ErrInvalid)
}
func (a fixedAlloc) Free(context.Context, int64) error { return nil }

// TestSlowNamespaceBlocksOnlyItsIO: while namespace "slow" (a slot of
// segment 1) resolves, a lookup of segment 0 on other namespaces goes
// through, a second IO to segment 1 gives up when its context ends, and the
// IO that started the resolution fails with its own context's error; once
// the namespace resolves, segment 1 reads.
func TestSlowNamespaceBlocksOnlyItsIO(t *testing.T) {
	g := layout.Geometry{K: 2, M: 1, Chunk: 4096, SlotSize: 64 << 10}
	set := &gatedSet{DeviceMap: DeviceMap{}, entered: make(chan struct{}), release: make(chan struct{})}
	for _, ns := range []string{"a", "b", "c", "slow", "d", "e"} {
		mem, err := blockdev.NewMem(g.SlotSize, 4096)
		if err != nil {
			t.Fatal(err)
		}
		set.DeviceMap[ns] = mem
	}
	alloc := fixedAlloc{
		0: {{NS: "a"}, {NS: "b"}, {NS: "c"}},
		1: {{NS: "slow"}, {NS: "d"}, {NS: "e"}},
	}
	v, err := New(Options{Geometry: g, Size: 2 * g.SegmentData(), Devices: set, Alloc: alloc, Dirty: NewMemDirtyLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	seg1 := g.SegmentData()
	first, cancelFirst := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() { firstDone <- v.ReadAt(first, make([]byte, 4096), seg1) }()
	<-set.entered

	if err := within(t, func() error { return v.ReadAt(context.Background(), make([]byte, 4096), 0) }); err != nil {
		t.Fatalf("segment 0 while segment 1's namespace resolves: %v", err)
	}
	second, cancelSecond := context.WithCancel(context.Background())
	cancelSecond()
	if err := within(t, func() error { return v.ReadAt(second, make([]byte, 4096), seg1) }); !errors.Is(err, context.Canceled) {
		t.Fatalf("segment 1 with a cancelled context: %v, want context.Canceled", err)
	}
	cancelFirst()
	if err := within(t, func() error { return <-firstDone }); !errors.Is(err, context.Canceled) {
		t.Fatalf("the IO resolving the namespace, cancelled: %v, want context.Canceled", err)
	}
	close(set.release)
	if err := within(t, func() error { return v.ReadAt(context.Background(), make([]byte, 4096), seg1) }); err != nil {
		t.Fatalf("segment 1 once its namespace resolves: %v", err)
	}
}

// within runs f and returns its error; a hang guard fails the test when f
// has not returned after a minute (it bounds a deadlock, it is not what is
// tested).
func within(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("blocked: the call did not return")
		return nil
	}
}
