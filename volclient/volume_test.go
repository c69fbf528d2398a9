package volclient

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/memetcd"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/placement"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
	"github.com/nvstripe/nvstripe/volume"
)

// testCluster is an etcd (in memory), n userspace NVMe/TCP targets (one host each, one
// in-memory namespace each) registered and labelled, and a volume.
type testCluster struct {
	store   *meta.Store
	targets []*target.Target
	etcd    *memetcd.Server
	mems    []*blockdev.Mem // behind targets, by index
}

func newTestCluster(t *testing.T, n int, nsSize, slotSize int64) *testCluster {
	t.Helper()
	etcd := metatest.Mem(t)
	store := storetest.OpenMem(t, etcd, meta.Config{})
	c := storetest.Init(t, store, meta.InitOptions{SlotSize: slotSize})
	tc := &testCluster{store: store, etcd: etcd}
	for i := 0; i < n; i++ {
		tc.addTarget(t, c, i, nsSize)
	}
	return tc
}

// memStore opens a Store (a process of its own) on etcd, closed when t
// ends.
func (tc *testCluster) addTarget(t *testing.T, c *meta.ClusterRecord, i int, nsSize int64) {
	mem, err := blockdev.NewMem(nsSize, 4096)
	if err != nil {
		t.Fatal(err)
	}
	tgt, _ := volclienttest.ServeNamespace(t, tc.store, c, i, mem)
	tc.targets = append(tc.targets, tgt)
	tc.mems = append(tc.mems, mem)
}

// openVolume creates volume "v" (4+2, chunk bytes per chunk) and opens it
// with o; it is closed when the test ends (Close is idempotent, so a test
// may close it earlier).
func (tc *testCluster) openVolume(t *testing.T, size, chunk int64, o OpenOptions) *Mapped {
	t.Helper()
	ctx := context.Background()
	if _, err := tc.store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: size, Layout: meta.Layout{K: 4, M: 2, Chunk: chunk}}); err != nil {
		t.Fatal(err)
	}
	m, err := OpenVolume(ctx, tc.store, "v", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// testOpenOptions are OpenOptions with short timeouts, so that a dead
// target turns into degraded IO quickly.
func testOpenOptions(holder string) OpenOptions {
	return OpenOptions{Holder: holder, Namespaces: NamespaceOptions{ControllerLossTimeout: time.Second, ConnectTimeout: 2 * time.Second}}
}

// TestVolumeSurvivesTargetDeath runs verified random IO on a 4+2 volume whose
// shards sit on six userspace NVMe/TCP targets and kills one target half-way:
// no IO fails and every block reads back as last written.
func TestVolumeSurvivesTargetDeath(t *testing.T) {
	const size = 48 << 20
	tc := newTestCluster(t, 6, 64<<20, 4<<20)
	ctx := context.Background()
	var degraded atomic.Int64
	opts := testOpenOptions("test")
	opts.Events = volume.EventListener{Degraded: func(volume.DegradedInfo) { degraded.Add(1) }}
	m := tc.openVolume(t, size, 64<<10, opts)

	model := make([]byte, size)
	var done atomic.Int64 // ops finished, to kill the target mid-run
	run := func(seed int64, ops int) {
		// Four workers, each on its own quarter: concurrent IO, exact model.
		var wg sync.WaitGroup
		q := int64(size / 4)
		for w := int64(0); w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				randomIO(t, m.Volume, model[w*q:(w+1)*q], w*q, rand.New(rand.NewSource(seed+w)), ops, &done)
			}()
		}
		wg.Wait()
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for done.Load() < 80 {
			runtime.Gosched()
		}
		tc.targets[2].Close() // a storage host dies with IO in flight
	}()
	run(1, 80)
	<-killed
	run(100, 40)
	if degraded.Load() == 0 {
		t.Error("no degraded IO reported after a target died")
	}
	got := make([]byte, size)
	if err := m.Volume.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, model) {
		t.Fatal("volume content differs from the model after the target died")
	}
}

// randomIO does ops random writes, and verified reads every third op, on the
// region of v at base that model mirrors.
func randomIO(t *testing.T, v blockdev.Device, model []byte, base int64, rng *rand.Rand, ops int, done *atomic.Int64) {
	ctx := context.Background()
	for i := 0; i < ops; i, _ = i+1, done.Add(1) {
		n := int64(rng.Intn(64)+1) * 4096
		off := rng.Int63n((int64(len(model))-n)/4096+1) * 4096
		if i%3 == 2 {
			got := make([]byte, n)
			err := v.ReadAt(ctx, got, base+off)
			if ok := bytes.Equal(got, model[off:off+n]); err != nil || !ok {
				t.Errorf("read %d+%d: err %v, matches model %v", base+off, n, err, ok)
			}
			continue
		}
		data := make([]byte, n)
		rng.Read(data)
		if err := v.WriteAt(ctx, data, base+off); err != nil {
			t.Errorf("write %d+%d: %v", base+off, n, err)
		}
		copy(model[off:], data)
	}
}

// TestRebuildRestoresRedundancy kills a target holding shards of a 4+2 volume
// with IO running, marks its namespace failed, rebuilds, and checks that
// every segment again has six shards on six distinct hosts, the data
// verifies, and two more targets can go (full redundancy is back).
func TestRebuildRestoresRedundancy(t *testing.T) {
	const size = 32 << 20
	tc := newTestCluster(t, 8, 64<<20, 4<<20)
	ctx := context.Background()
	m := tc.openVolume(t, size, 64<<10, testOpenOptions("test"))
	model := make([]byte, size)
	var done atomic.Int64
	randomIO(t, m.Volume, model, 0, rand.New(rand.NewSource(7)), 150, &done)
	full := make([]byte, size)
	rand.New(rand.NewSource(8)).Read(full[:8<<20])
	if err := m.Volume.WriteAt(ctx, full[:8<<20], 0); err != nil {
		t.Fatal(err)
	}
	copy(model, full[:8<<20])

	victim := tc.hostWithShards(t, m)
	tc.targets[victim].Close()
	if err := tc.store.SetNamespaceState(ctx, fmt.Sprintf("h%d-n1", victim), placement.StateFailed); err != nil {
		t.Fatal(err)
	}
	var last MoveProgress
	n, err := m.Rebuild(ctx, tc.store, 4, func(p MoveProgress) { last = p })
	if err != nil || n == 0 {
		t.Fatalf("rebuild: %d shards, %v", n, err)
	}
	if !last.Finished || last.Err != nil {
		t.Errorf("last progress report %+v", last)
	}
	if lost, _ := m.LostShards(ctx, tc.store); len(lost) != 0 {
		t.Fatalf("%d shards still on the failed namespace", len(lost))
	}
	tc.checkDistinctHosts(t, m)
	got := make([]byte, size)
	if err := m.Volume.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("after rebuild: err %v, equal %v", err, bytes.Equal(got, model))
	}
	for _, h := range tc.twoOtherHosts(victim) {
		tc.targets[h].Close()
	}
	if err := m.Volume.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("after rebuild and two more targets lost: err %v, equal %v", err, bytes.Equal(got, model))
	}
}

// hostWithShards returns the index of a target that holds shards of m.
func (tc *testCluster) hostWithShards(t *testing.T, m *Mapped) int {
	segs, _, err := m.Map.Segments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range segs {
		var i int
		fmt.Sscanf(rec.Slots[0].NS, "h%d-n1", &i)
		return i
	}
	t.Fatal("no segment allocated")
	return 0
}

func (tc *testCluster) twoOtherHosts(victim int) []int {
	var out []int
	for i := range tc.targets {
		if i != victim && len(out) < 2 {
			out = append(out, i)
		}
	}
	return out
}

func (tc *testCluster) checkDistinctHosts(t *testing.T, m *Mapped) {
	segs, _, err := m.Map.Segments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for id, rec := range segs {
		seen := map[string]bool{}
		for _, s := range rec.Slots {
			ns, err := tc.store.Namespace(context.Background(), s.NS)
			if err != nil {
				t.Fatal(err)
			}
			if seen[ns.Host] || ns.State != placement.StateIn.String() {
				t.Fatalf("segment %d: shard on %s (host %s, state %s) repeats a host or is not in", id, s.NS, ns.Host, ns.State)
			}
			seen[ns.Host] = true
		}
		if rec.Move != nil {
			t.Fatalf("segment %d: move left in flight", id)
		}
	}
}
