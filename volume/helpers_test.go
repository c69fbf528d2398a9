package volume

import (
	"bytes"
	"context"
	"fmt"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/blockdev/faultdev"
	"github.com/nvstripe/nvstripe/ec"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// rig is a volume over fault-injecting in-memory namespaces.
type rig struct {
	g     layout.Geometry
	mems  []*blockdev.Mem
	devs  []*faultdev.Dev
	names []string
	alloc *MemAllocator
	dirty *MemDirtyLog
	stale StaleLog
	vol   *Volume
	epoch int64 // Options.LogEpoch of the last open

	unsettled *MemUnsettledLog // kept across reopens, as the other logs
}

type rigOptions struct {
	namespaces int   // default K+M
	slots      int64 // per namespace; default enough for size
	crashable  bool
	pureGo     bool // ec.WithSIMD(false)
}

func newRig(t tb, g layout.Geometry, size int64, o rigOptions) *rig {
	t.Helper()
	if o.namespaces == 0 {
		o.namespaces = g.N()
	}
	if o.slots == 0 {
		o.slots = g.Segments(size) + 1
	}
	r := &rig{g: g, dirty: NewMemDirtyLog(), stale: NewMemStaleLog(), unsettled: NewMemUnsettledLog()}
	dm := DeviceMap{}
	slots := map[string]int64{}
	for i := 0; i < o.namespaces; i++ {
		var m *blockdev.Mem
		var err error
		if o.crashable {
			m, err = blockdev.NewCrashableMem(o.slots*g.SlotSize, 4096)
		} else {
			m, err = blockdev.NewMem(o.slots*g.SlotSize, 4096)
		}
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("ns%02d", i)
		fd := faultdev.New(m, int64(i))
		r.mems, r.devs, r.names = append(r.mems, m), append(r.devs, fd), append(r.names, name)
		dm[name] = fd
		slots[name] = o.slots
	}
	r.alloc = NewMemAllocator(g.N(), slots)
	var opts []ec.Option
	if o.pureGo {
		opts = append(opts, ec.WithSIMD(false))
	}
	r.epoch = 1
	v, err := New(Options{Geometry: g, Size: size, Devices: dm, Alloc: r.alloc, Dirty: r.dirty, Stale: r.stale, Unsettled: r.unsettled, CodecOptions: opts, LogEpoch: r.epoch})
	if err != nil {
		t.Fatal(err)
	}
	r.vol = v
	return r
}

// memNamespaces makes g.N() in-memory namespaces ns0, ns1... of slots
// slots each, without faultdev (benchmarks and golden outputs): the device
// map, each one's slot count for NewMemAllocator, and the devices.
func memNamespaces(t tb, g layout.Geometry, slots int64) (DeviceMap, map[string]int64, []*blockdev.Mem) {
	t.Helper()
	dm := DeviceMap{}
	counts := map[string]int64{}
	var mems []*blockdev.Mem
	for i := 0; i < g.N(); i++ {
		m, err := blockdev.NewMem(slots*g.SlotSize, 4096)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("ns%d", i)
		dm[name], counts[name] = m, slots
		mems = append(mems, m)
	}
	return dm, counts, mems
}

// reopen builds a fresh Volume over the same devices (a new owner).
func (r *rig) reopen(t tb, devs DeviceMap) {
	t.Helper()
	r.epoch++
	v, err := New(Options{Geometry: r.g, Size: r.vol.Size(), Devices: devs, Alloc: r.alloc, Dirty: r.dirty, Stale: r.stale, Unsettled: r.unsettled, LogEpoch: r.epoch})
	if err != nil {
		t.Fatal(err)
	}
	r.vol = v
}

func (r *rig) stats() faultdev.Stats {
	var s faultdev.Stats
	for _, d := range r.devs {
		x := d.Stats()
		s.Reads += x.Reads
		s.Writes += x.Writes + x.FUAWrites
		s.Trims += x.Trims
		s.Flushes += x.Flushes
	}
	return s
}

func (r *rig) resetStats() {
	for _, d := range r.devs {
		d.ResetStats()
	}
}

// checkParity verifies that every stripe of every allocated segment whose
// shards are all usable has parity matching its data.
func (r *rig) checkParity(t tb) {
	t.Helper()
	ctx := context.Background()
	for _, s := range r.vol.cachedSegments() {
		for st := int64(0); st < r.g.StripesPerSegment(); st++ {
			shards := make([][]byte, r.g.N())
			healthy := true
			for sh := range shards {
				i := r.g.SlotOf(st, sh)
				if !s.usable(i, st) {
					healthy = false
					break
				}
				shards[sh] = make([]byte, r.g.Chunk)
				sl := s.slots[i]
				if err := r.mems[r.index(sl.ref.NS)].ReadAt(ctx, shards[sh], sl.ref.Slot*r.g.SlotSize+st*r.g.Chunk); err != nil {
					t.Fatal(err)
				}
			}
			if !healthy {
				continue
			}
			ok, err := r.vol.codec.Verify(shards)
			if err != nil || !ok {
				t.Fatalf("segment %d stripe %d: parity does not match data (err %v)", s.id, st, err)
			}
		}
	}
}

func (r *rig) index(ns string) int {
	for i, n := range r.names {
		if n == ns {
			return i
		}
	}
	panic(fmt.Errorf("no namespace %q", ns))
}

// addPattern is the test data volume's tests used before testutil.Pattern:
// its versions differ by addition, testutil.Pattern's by a constant XOR.
// The golden record and workload pin its bytes; TestPropertyCrash draws it
// beside data whose versions differ alike (crashPatterns).
func addPattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>12)
	}
	return b
}

func mustRead(t tb, v *Volume, off int64, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := v.ReadAt(context.Background(), b, off); err != nil {
		t.Fatalf("read %d+%d: %v", off, n, err)
	}
	return b
}

// mustWriteFlushed writes p at off and flushes v, failing t on an error.
func mustWriteFlushed(t tb, v *Volume, p []byte, off int64) {
	t.Helper()
	ctx := context.Background()
	if err := v.WriteAt(ctx, p, off); err != nil {
		t.Fatalf("write %d+%d: %v", off, len(p), err)
	}
	if err := v.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func mustEqual(t tb, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: differs at byte %d (of %d)", what, i, len(want))
	}
}

// crash returns what the rig's devices keep if they crash now: crash
// clones (what was flushed or written FUA), once the devices flush says to
// (nil: none) have flushed their caches.
func (r *rig) crash(t tb, ctx context.Context, flush func(i int) bool) DeviceMap {
	t.Helper()
	devs := DeviceMap{}
	for i, m := range r.mems {
		if flush != nil && flush(i) {
			if err := m.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		devs[r.names[i]] = m.CrashClone()
	}
	return devs
}

// rebindMems points checkParity at the devices of devs (after a crash).
func (r *rig) rebindMems(devs DeviceMap) {
	for i, n := range r.names {
		r.mems[i] = devs[n].(*blockdev.Mem)
	}
}
