package agent

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/placement"
)

// benchCluster is newTestCluster for benchmarks: n userspace targets with an
// in-memory namespace each, and a written 4+2 volume "v" mapped by "bench".
func benchCluster(b *testing.B, n int, nsSize, slotSize, volSize int64) (*meta.Store, []*target.Target, *Mapped) {
	ctx := context.Background()
	store, err := meta.Open(ctx, meta.Config{Endpoints: metatest.Start(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	c, err := store.InitCluster(ctx, meta.InitOptions{SlotSize: slotSize})
	if err != nil {
		b.Fatal(err)
	}
	var tgts []*target.Target
	for i := 0; i < n; i++ {
		tgts = append(tgts, benchTarget(b, store, c, i, nsSize))
	}
	if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: volSize, Layout: meta.Layout{K: 4, M: 2, Chunk: 128 << 10}}); err != nil {
		b.Fatal(err)
	}
	m, err := OpenVolume(ctx, store, "v", OpenOptions{Holder: "bench",
		Namespaces: NamespaceOptions{ControllerLossTimeout: time.Second, ConnectTimeout: 2 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close(ctx) })
	buf := make([]byte, 8<<20)
	rand.New(rand.NewSource(1)).Read(buf)
	for off := int64(0); off < volSize; off += int64(len(buf)) {
		if err := m.Volume.WriteAt(ctx, buf, off); err != nil {
			b.Fatal(err)
		}
	}
	return store, tgts, m
}

func benchTarget(b *testing.B, store *meta.Store, c *meta.ClusterRecord, i int, nsSize int64) *target.Target {
	mem, err := blockdev.NewMem(nsSize, 4096)
	if err != nil {
		b.Fatal(err)
	}
	tgt, _ := serveNamespace(b, store, c, i, mem)
	return tgt
}

// rebuildAll reconstructs every lost shard of m with parallel moves, paced
// by pacer (nil: unpaced), and returns the bytes of shard data rebuilt.
func rebuildAll(b *testing.B, store *meta.Store, m *Mapped, pacer *controller.Pacer, parallel int) int64 {
	ctx := context.Background()
	lost, err := m.LostShards(ctx, store)
	if err != nil || len(lost) == 0 {
		b.Fatalf("lost shards %v: %v", lost, err)
	}
	var pace func(context.Context, int64) error
	if pacer != nil {
		pace = pacer.Wait
	}
	var bytes atomic.Int64
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, l := range lost {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := m.MoveShardPaced(ctx, l[0], int(l[1]), "", pace, func(p MoveProgress) {
				if p.Finished && p.Err == nil {
					bytes.Add(p.Total * m.Record.Layout.Chunk)
				}
			})
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	return bytes.Load()
}

// foreground reads 1 MiB blocks at random until stop, reporting each read's
// latency to pacer (when set), and returns the bytes read.
func foreground(m *Mapped, pacer *controller.Pacer, stop <-chan struct{}) int64 {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(2))
	buf := make([]byte, 1<<20)
	blocks := m.Record.Size / int64(len(buf))
	var n int64
	for {
		select {
		case <-stop:
			return n
		default:
		}
		t0 := time.Now()
		if err := m.Volume.ReadAt(ctx, buf, rng.Int63n(blocks)*int64(len(buf))); err != nil {
			return n
		}
		if pacer != nil {
			pacer.Observe(time.Since(t0))
		}
		n += int64(len(buf))
	}
}

// BenchmarkRebuildIdle measures rebuild speed (bytes of reconstructed shard
// data per second) of a 4+2 volume on 8 userspace NVMe/TCP targets with
// in-memory namespaces, one target killed, unpaced, no foreground IO.
func BenchmarkRebuildIdle(b *testing.B) {
	benchRebuild(b, false)
}

// BenchmarkRebuildUnderReads is BenchmarkRebuildIdle with a foreground
// reader running and the default Pacer (256 MiB/s, slowed by foreground
// latency). fg-ratio is the foreground throughput during the rebuild over
// that of the second before it.
func BenchmarkRebuildUnderReads(b *testing.B) {
	benchRebuild(b, true)
}

// settle reads the whole volume once (degraded) so that the dead target's
// connection loss is noticed before anything is timed.
func settle(b *testing.B, m *Mapped) {
	buf := make([]byte, 8<<20)
	for off := int64(0); off < m.Record.Size; off += int64(len(buf)) {
		if err := m.Volume.ReadAt(context.Background(), buf, off); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRebuild(b *testing.B, reads bool) {
	const slot, vol = 16 << 20, 512 << 20
	var total int64
	var ratio float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		store, tgts, m := benchCluster(b, 8, 192<<20, slot, vol)
		victim := 0
		if segs, _, err := m.Map.Segments(context.Background()); err == nil {
			for _, s := range segs {
				fmt.Sscanf(s.Slots[0].NS, "h%d-n1", &victim)
				break
			}
		}
		tgts[victim].Close()
		if err := store.SetNamespaceState(context.Background(), fmt.Sprintf("h%d-n1", victim), placement.StateFailed); err != nil {
			b.Fatal(err)
		}
		settle(b, m) // the volume notices the dead target before the clock starts
		var pacer *controller.Pacer
		var before float64
		stop := make(chan struct{})
		fgDone := make(chan int64, 1)
		if reads {
			pacer, _ = controller.NewPacer(controller.PacerConfig{})
			go func() { fgDone <- foreground(m, pacer, stop) }()
			time.Sleep(time.Second) // first second: the baseline
			close(stop)
			before = float64(<-fgDone)
			stop = make(chan struct{})
			go func() { fgDone <- foreground(m, pacer, stop) }()
		}
		t0 := time.Now()
		b.StartTimer()
		total += rebuildAll(b, store, m, pacer, 4)
		b.StopTimer()
		if reads {
			close(stop)
			ratio += float64(<-fgDone) / time.Since(t0).Seconds() / before
		}
	}
	b.SetBytes(total / int64(b.N))
	if reads {
		b.ReportMetric(ratio/float64(b.N), "fg-ratio")
	}
}

// BenchmarkDeathToRedundancy measures the time from a target's death to
// full redundancy of a mapped 512 MiB 4+2 volume on 8 userspace targets:
// the controller's probe notices (Grace 300ms), marks the namespace out
// (OutAfter 1s, test timings), the owner rebuilds (unpaced). SetBytes is the
// volume size.
func BenchmarkDeathToRedundancy(b *testing.B) {
	const slot, vol = 16 << 20, 512 << 20
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		store, tgts, m := benchCluster(b, 8, 192<<20, slot, vol)
		ctx, stop := context.WithCancel(context.Background())
		go m.ServeTasks(ctx, store, TaskOptions{Holder: "bench", Interval: 50 * time.Millisecond})
		runControllerLog(b, store, func(string, ...any) {})
		victim := 0
		if segs, _, err := m.Map.Segments(ctx); err == nil {
			for _, s := range segs {
				fmt.Sscanf(s.Slots[0].NS, "h%d-n1", &victim)
				break
			}
		}
		time.Sleep(500 * time.Millisecond) // the controller leads and has seen every host up
		b.StartTimer()
		tgts[victim].Close()
		waitRebuilt(b, store, fmt.Sprintf("h%d-n1", victim))
		b.StopTimer()
		stop()
	}
	b.SetBytes(vol)
}
