package volclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/faultnet"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
)

// gatedRead is a namespace's device that, once armed, holds the first read
// within [lo, hi) at the target before it touches the medium, until
// released: a read a client issued and the target carries out late.
type gatedRead struct {
	blockdev.Passthrough
	lo, hi  atomic.Int64
	armed   atomic.Bool
	held    chan struct{} // closed when the read is held
	release chan struct{}
}

func newGatedRead(d blockdev.Device) *gatedRead {
	return &gatedRead{Passthrough: blockdev.Passthrough{Device: d}, held: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedRead) arm(lo, hi int64) {
	g.lo.Store(lo)
	g.hi.Store(hi)
	g.armed.Store(true)
}

func (g *gatedRead) ReadAt(ctx context.Context, p []byte, off int64) error {
	if off >= g.lo.Load() && off < g.hi.Load() && g.armed.CompareAndSwap(true, false) {
		close(g.held)
		<-g.release
	}
	return g.Device.ReadAt(ctx, p, off)
}

// fillFreedSlot creates volume name (2+2, two slots of slotSize a shard),
// writes it full of 0xEE and checks that it took the freed slot old: a read
// of old by an owner that still thinks it holds it returns those bytes. The
// mapping is returned open.
func fillFreedSlot(ctx context.Context, t *testing.T, store *meta.Store, name string, slotSize int64, old meta.SlotRef) *Mapped {
	t.Helper()
	if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: name, Size: 2 * slotSize,
		Layout: meta.Layout{K: 2, M: 2, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	ow, err := OpenVolume(ctx, store, name, testOpenOptions("other"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ow.Volume.WriteAt(ctx, bytes.Repeat([]byte{0xEE}, int(2*slotSize)), 0); err != nil {
		t.Fatal(err)
	}
	if err := ow.Volume.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	orec, err := ow.Map.Segment(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(orec.Slots, old) {
		ow.Close(ctx)
		t.Fatalf("the other volume's slots %v do not include the freed %v: the scenario did not happen", orec.Slots, old)
	}
	return ow
}

// TestReadAfterLeaseFenced: a read-only mapping (a 2s lease, its etcd
// reached through a proxy) issues a read of a shard; the target holds it.
// Meanwhile the reader is cut off etcd (as a stopped process would be),
// its lease expires, the controller's mover moves that shard away and,
// with nobody left reading, releases the old slot; another volume gets the
// slot and fills it. Then the target carries out the held read, from a
// slot that now holds the other volume's bytes. The read must fail with
// ErrFenced (the reader's lease was no longer certainly held when it
// completed), never return those bytes. Before reads were checked against
// the lease after they completed, it returned the other volume's data.
// (A read-write owner's volume sits behind the same fence; its read cannot
// be held at a target this way, since the next owner's claim aborts it.)
func TestReaderReadAfterLeaseFenced(t *testing.T) {
	ctx := context.Background()
	eps := metatest.Start(t)
	store := storetest.Open(t, meta.Config{Endpoints: eps})
	const slotSize = 4 << 20
	c := storetest.Init(t, store, meta.InitOptions{SlotSize: slotSize})
	var gates []*gatedRead
	for i := range 4 {
		mem, err := blockdev.NewMem(32<<20, 4096)
		if err != nil {
			t.Fatal(err)
		}
		g := newGatedRead(mem)
		gates = append(gates, g)
		volclienttest.ServeNamespace(t, store, c, i, g)
	}
	lay := meta.Layout{K: 2, M: 1, Chunk: 64 << 10} // format 1: no checksum to catch the foreign bytes
	if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: 2 * slotSize, Layout: lay}); err != nil {
		t.Fatal(err)
	}
	mine := bytes.Repeat([]byte{0x11}, 2*slotSize)
	writeOnce(ctx, t, store, "v", mine)

	proxy, err := faultnet.New(strings.TrimPrefix(eps[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	rstore := storetest.Open(t, meta.Config{Endpoints: []string{proxy.Addr()}})
	o := testOpenOptions("reader")
	o.ReadOnly, o.LeaseTTL = true, 2*time.Second
	r, err := OpenVolume(ctx, rstore, "v", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	verifyThrough(t, r.Volume, mine, "the reader before anything happens")

	seg, err := store.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := seg.Segment(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := rec.Slots[0] // holds stripe 0's first chunk
	var gi int
	if _, err := fmt.Sscanf(old.NS, "h%d-n1", &gi); err != nil {
		t.Fatal(err)
	}
	gates[gi].arm(old.Slot*slotSize, (old.Slot+1)*slotSize)
	got := make([]byte, 64<<10)
	read := make(chan error, 1)
	go func() { read <- r.Volume.ReadAt(ctx, got, 0) }()
	<-gates[gi].held
	var released sync.Once
	let := func() { released.Do(func() { close(gates[gi].release) }) }
	t.Cleanup(let) // before the mapping closes (cleanups run last first)
	proxy.Stall()  // the reader hears nothing from etcd from now on
	defer proxy.Resume()
	waitUntil(t, "the lease expired in etcd", func() bool {
		owners, err := store.Owners(ctx, "v")
		return err == nil && len(owners) == 0
	})
	t.Logf("the reader's read of %s/%d is held at the target; the reader is cut off etcd", old.NS, old.Slot)

	mo := testOpenOptions("ctl")
	mo.Mover = true
	mv, err := OpenVolume(ctx, store, "v", mo)
	if err != nil {
		t.Fatal(err)
	}
	defer mv.Close(ctx)
	if err := mv.MoveShard(ctx, 0, 0, "", nil); err != nil {
		t.Fatalf("moving shard 0 away (the mover waits for the reader's lease to expire): %v", err)
	}
	a, err := store.Allocation(ctx, old.NS)
	if err != nil || a.Bitmap[old.Slot/8]&(1<<(old.Slot%8)) != 0 {
		t.Fatalf("the old slot %v is still allocated after the move (%v)", old, err)
	}
	ow := fillFreedSlot(ctx, t, store, "other", slotSize, old)
	defer ow.Close(ctx)

	let()
	err = <-read
	switch {
	case err == nil && bytes.Equal(got, mine[:len(got)]):
		t.Fatal("the late read returned the reader's data: the freed slot was not overwritten, the scenario did not happen")
	case err == nil:
		t.Fatalf("the reader's read completing after its lease returned bytes that are not its own (%x...): the other volume's", got[:8])
	case blockdev.Class(err) != blockdev.ErrFenced:
		t.Fatalf("the late read: %v, want class ErrFenced", err)
	}
	if !errors.Is(err, meta.ErrLeaseLost) {
		t.Errorf("the late read's error %v does not say the lease was lost", err)
	}
	t.Logf("the late read failed: %v", err)
}
