package volclient

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/placement"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
)

// benchCluster is newTestCluster for benchmarks: n userspace targets with an
// in-memory namespace each, and a written 4+2 volume "v" mapped by "bench".
func benchCluster(b *testing.B, n int, nsSize, slotSize, volSize int64) (*meta.Store, []*target.Target, *Mapped) {
	store, tgts, m, _ := benchClusterOn(b, n, slotSize, volSize, "", func(int) blockdev.Device {
		mem, err := blockdev.NewMem(nsSize, 4096)
		if err != nil {
			b.Fatal(err)
		}
		return mem
	})
	return store, tgts, m
}

// benchStore starts an etcd and a store on it, closed when b ends, and
// initialises the cluster with slotSize.
func benchStore(b *testing.B, slotSize int64) (*meta.Store, *meta.ClusterRecord) {
	b.Helper()
	store := storetest.Open(b, meta.Config{Endpoints: metatest.Start(b)})
	return store, storetest.Init(b, store, meta.InitOptions{SlotSize: slotSize})
}

// benchClusterOn is benchCluster with namespace i on newDev(i) and the
// volume's Layout.Checksum set to checksum. It also returns how long
// writing the volume took (four writers of 8 MiB requests).
func benchClusterOn(b *testing.B, n int, slotSize, volSize int64, checksum string, newDev func(i int) blockdev.Device) (*meta.Store, []*target.Target, *Mapped, time.Duration) {
	ctx := context.Background()
	store, c := benchStore(b, slotSize)
	var tgts []*target.Target
	for i := 0; i < n; i++ {
		tgt, _ := volclienttest.ServeNamespace(b, store, c, i, newDev(i))
		tgts = append(tgts, tgt)
	}
	if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: volSize, Layout: meta.Layout{K: 4, M: 2, Chunk: 128 << 10, Checksum: checksum}}); err != nil {
		b.Fatal(err)
	}
	m, err := OpenVolume(ctx, store, "v", OpenOptions{Holder: "bench",
		Namespaces: NamespaceOptions{ControllerLossTimeout: time.Second, ConnectTimeout: 2 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close(ctx) })
	t0 := time.Now()
	fillBench(b, m, volSize)
	return store, tgts, m, time.Since(t0)
}

// fillBench writes the whole volume with four writers of 8 MiB requests.
func fillBench(b *testing.B, m *Mapped, volSize int64) {
	const req, writers = 8 << 20, 4
	buf := make([]byte, req)
	rand.New(rand.NewSource(1)).Read(buf)
	var wg sync.WaitGroup
	for w := int64(0); w < writers; w++ {
		wg.Go(func() {
			for off := w * req; off < volSize; off += writers * req {
				if err := m.Volume.WriteAt(context.Background(), buf[:min(req, volSize-off)], off); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// rebuildAll reconstructs every lost shard of m with parallel moves, paced
// by pacer (nil: unpaced), and returns the bytes of shard data rebuilt.
func rebuildAll(b *testing.B, store *meta.Store, m *Mapped, pacer *moves.Pacer, parallel int) int64 {
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
func foreground(m *Mapped, pacer *moves.Pacer, stop <-chan struct{}) int64 {
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

// fgReads is foreground reads (see foreground) beside a background job.
type fgReads struct {
	stop   chan struct{}
	done   chan int64
	before float64 // bytes read in the baseline second
}

// startForeground starts reads of m, their latencies observed by pacer: a
// second alone (the baseline), then on, beside the job measured, until
// share.
func startForeground(m *Mapped, pacer *moves.Pacer) *fgReads {
	f := &fgReads{stop: make(chan struct{}), done: make(chan int64, 1)}
	go func() { f.done <- foreground(m, pacer, f.stop) }()
	time.Sleep(time.Second) // first second: the baseline
	close(f.stop)
	f.before = float64(<-f.done)
	f.stop = make(chan struct{})
	go func() { f.done <- foreground(m, pacer, f.stop) }()
	return f
}

// share stops the reads and returns their rate over d, the time the job
// ran, as a share of the baseline rate.
func (f *fgReads) share(d time.Duration) float64 {
	close(f.stop)
	return float64(<-f.done) / d.Seconds() / f.before
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
	const slot, vol = 16 << 20, 1 << 30
	var total int64
	var ratio float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		store, tgts, m := benchCluster(b, 8, 384<<20, slot, vol)
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
		var pacer *moves.Pacer
		var fg *fgReads
		if reads {
			pacer, _ = moves.NewPacer(moves.PacerConfig{})
			fg = startForeground(m, pacer)
		}
		t0 := time.Now()
		b.StartTimer()
		total += rebuildAll(b, store, m, pacer, 4)
		b.StopTimer()
		if reads {
			ratio += fg.share(time.Since(t0))
		}
	}
	b.SetBytes(total / int64(b.N))
	if reads {
		b.ReportMetric(ratio/float64(b.N), "fg-ratio")
	}
}

// Flags of BenchmarkDeathToRedundancy.
var (
	deathSize = flag.String("death-size", "512MiB",
		"volume size of BenchmarkDeathToRedundancy (units.ParseSize: 512MiB, 10G); above 1GiB the namespaces are files under -death-dir")
	deathDir = flag.String("death-dir", "",
		"directory for the file-backed namespaces of BenchmarkDeathToRedundancy (default: a temporary directory)")
)

// deathConfig is one BenchmarkDeathToRedundancy set-up.
type deathConfig struct {
	vol, slot, nsSize int64
	files             bool   // file-backed namespaces (else in memory)
	dir               string // for the files
}

// newDeathConfig derives the set-up from -death-size and -death-dir: up to
// 1 GiB, 16 MiB slots on in-memory namespaces; above, 256 MiB slots on
// sparse files (10 GiB of 4+2 data is 15 GiB of shards, too much for memory
// next to everything else). Namespaces hold twice an even share of the
// shards plus the label slot, so that the seven survivors can take the
// eighth's shards.
func newDeathConfig(b *testing.B) deathConfig {
	vol, err := units.ParseSize(*deathSize)
	if err != nil {
		b.Fatal(err)
	}
	c := deathConfig{vol: vol, slot: 16 << 20, dir: *deathDir}
	if vol > 1<<30 {
		c.slot, c.files = 256<<20, true
	}
	segs := (vol + 4*c.slot - 1) / (4 * c.slot)
	perNS := (segs*6 + 7) / 8
	c.nsSize = (2*perNS + 1) * c.slot
	if c.files && c.dir == "" {
		c.dir = b.TempDir()
	}
	return c
}

// device returns namespace i's device, closed when the benchmark ends.
func (c deathConfig) device(b *testing.B, i int) blockdev.Device {
	if !c.files {
		mem, err := blockdev.NewMem(c.nsSize, 4096)
		if err != nil {
			b.Fatal(err)
		}
		return mem
	}
	path := filepath.Join(c.dir, fmt.Sprintf("death-ns%d.img", i))
	f, err := blockdev.OpenFile(path, &blockdev.FileOptions{Size: c.nsSize, Sparse: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close(); os.Remove(path) })
	return f
}

// deathTimes are the phases of one death-to-redundancy run.
type deathTimes struct {
	fill, out, total time.Duration
	rebuilt          int64 // bytes of shard data reconstructed
}

// BenchmarkDeathToRedundancy measures the time from a target's death to
// full redundancy of a mapped 4+2 volume (-death-size, default 512 MiB) on
// 8 userspace NVMe/TCP targets: the controller's TCP probe notices (Grace
// 300ms) and marks the namespace out (OutAfter 1s; test timings, so
// death->out is about 1.3s plus probe and tick delays), the owner rebuilds
// through task records (unpaced, the controller's default limits of moves
// in flight). ns/op is death to redundancy; the metrics split it into
// out-s (death to out) and rebuild-s (out to redundancy), report fill-s
// (writing the volume, before the clock starts), rebuilt-GB (shard data
// reconstructed: lost shards x slot size) and rebuilt-GB/s (over
// rebuild-s). SetBytes is the volume size. Above 1 GiB the namespaces are
// sparse files (see newDeathConfig), e.g.
//
//	go test -run XXX -bench BenchmarkDeathToRedundancy -benchtime 1x ./volclient/ -args -death-size 10GiB
func BenchmarkDeathToRedundancy(b *testing.B) {
	cfg := newDeathConfig(b)
	var sum deathTimes
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t := deathRun(b, cfg)
		sum.fill += t.fill
		sum.out += t.out
		sum.total += t.total
		sum.rebuilt += t.rebuilt
	}
	n := float64(b.N)
	b.SetBytes(cfg.vol)
	b.ReportMetric(sum.fill.Seconds()/n, "fill-s")
	b.ReportMetric(sum.out.Seconds()/n, "out-s")
	b.ReportMetric((sum.total-sum.out).Seconds()/n, "rebuild-s")
	b.ReportMetric(float64(sum.rebuilt)/1e9/n, "rebuilt-GB")
	b.ReportMetric(float64(sum.rebuilt)/1e9/(sum.total-sum.out).Seconds(), "rebuilt-GB/s")
}

// deathRun sets up a cluster, kills the target holding the first shard of
// the first segment and times the way back to redundancy (with the
// benchmark timer running from the kill to the end).
func deathRun(b *testing.B, cfg deathConfig) deathTimes {
	store, tgts, m, fill := benchClusterOn(b, 8, cfg.slot, cfg.vol, "", func(i int) blockdev.Device { return cfg.device(b, i) })
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan struct{})
	go func() {
		defer close(served)
		m.ServeTasks(ctx, store, TaskOptions{Holder: "bench", Interval: 50 * time.Millisecond})
	}()
	defer func() { stop(); <-served }()
	r := startCtl(b, store, "ctl", nil, func(string, ...any) {})
	for !r.Leading() {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the controller has seen every host up
	segs, _, err := m.Map.Segments(ctx)
	if err != nil || len(segs) == 0 {
		b.Fatalf("segments %d: %v", len(segs), err)
	}
	ns := segs[0].Slots[0].NS
	victim, lost := 0, int64(0)
	fmt.Sscanf(ns, "h%d-n1", &victim)
	for _, s := range segs {
		for _, sl := range s.Slots {
			if sl.NS == ns {
				lost++
			}
		}
	}
	t0 := time.Now()
	b.StartTimer()
	tgts[victim].Close()
	out := waitRedundancy(b, store, ns, cfg.vol)
	b.StopTimer()
	return deathTimes{fill: fill, out: out.Sub(t0), total: time.Since(t0), rebuilt: lost * cfg.slot}
}

// waitRedundancy polls metadata until namespace ns is out, holds no shard
// and no move or task is left; it returns when ns was first seen out.
func waitRedundancy(b *testing.B, store *meta.Store, ns string, vol int64) time.Time {
	deadline := time.Now().Add(2*time.Minute + time.Duration(vol/(5<<20))*time.Second) // a hang guard: 5 MB/s
	var out time.Time
	for {
		snap, err := controller.LoadSnapshot(context.Background(), store)
		if err != nil {
			b.Fatal(err)
		}
		isOut := snap.Namespaces[ns].State == placement.StateOut.String()
		if isOut && out.IsZero() {
			out = time.Now()
		}
		left := shardsLeft(snap, ns)
		if isOut && left == 0 && len(snap.Tasks) == 0 {
			return out
		}
		if time.Now().After(deadline) {
			b.Fatalf("no redundancy yet: %d shards or moves left, %d tasks, %s is %s", left, len(snap.Tasks), ns, snap.Namespaces[ns].State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
