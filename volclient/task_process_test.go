package volclient

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
	"github.com/nvstripe/nvstripe/meta/storetest"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// procCluster is an embedded etcd holding an initialized cluster (4 MiB
// slots) and n `nvstripe target serve` processes of bin, each a host with
// one namespace: the start of every process test here.
type procCluster struct {
	bin   string
	eps   []string
	store *meta.Store
	c     *meta.ClusterRecord
	procs []*procTarget
}

func startProcCluster(t *testing.T, n int) *procCluster {
	t.Helper()
	return startProcClusterOn(t, buildNvstripe(t), metatest.Start(t), n)
}

// startProcClusterOn is startProcCluster with the binary bin and the etcd
// at eps.
func startProcClusterOn(t *testing.T, bin string, eps []string, n int) *procCluster {
	t.Helper()
	p := &procCluster{bin: bin, eps: eps}
	p.store = storetest.Open(t, meta.Config{Endpoints: p.eps})
	p.c = storetest.Init(t, p.store, meta.InitOptions{SlotSize: 4 << 20})
	for i := range n {
		p.procs = append(p.procs, startProcTarget(t, p.bin, p.store, p.c, i))
	}
	return p
}

// startProcTarget starts target i in a temporary directory (see
// startProcTargetIn).
func startProcTarget(t *testing.T, bin string, store *meta.Store, c *meta.ClusterRecord, i int) *procTarget {
	t.Helper()
	return startProcTargetIn(t, bin, store, c, i, t.TempDir())
}

// procTarget is one `nvstripe target serve` process.
type procTarget struct {
	cmd      *exec.Cmd
	addr     string
	dir, nqn string // dir holds the namespace file d0.img
	dead     bool
}

// buildNvstripe builds the nvstripe binary into a temporary directory.
func buildNvstripe(t *testing.T) string {
	t.Helper()
	return testutil.BuildNvstripe(t, "")
}

// freeAddr is testutil.FreeAddr under this package's old name.
var freeAddr = testutil.FreeAddr

// startProcTargetIn starts target i as a process serving one file-backed
// namespace in dir, waits until it listens, and records host hI with it.
func startProcTargetIn(t *testing.T, bin string, store *meta.Store, c *meta.ClusterRecord, i int, dir string) *procTarget {
	t.Helper()
	nqn := fmt.Sprintf("nqn.2026-11.io.nvstripe:proc-t%d", i)
	p := runProcTarget(t, bin, dir, freeAddr(t), nqn)
	ctx := context.Background()
	rec := storetest.AddHost(t, store, nil, meta.NamespaceSpec{Host: fmt.Sprintf("h%d", i), NQN: nqn, NSID: 1, Size: 96 << 20,
		Paths: []meta.PathRecord{{Addr: "tcp://" + p.addr, ANAGroup: 1}}})
	dev, err := Connect(ctx, rec, NamespaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := WriteLabel(ctx, dev, c.Label(rec.ID)); err != nil {
		t.Fatal(err)
	}
	return p
}

// runProcTarget runs `nvstripe target serve` with --dir dir on addr for
// subsystem nqn (one 96 MiB namespace, d0) and waits until it listens.
func runProcTarget(t *testing.T, bin, dir, addr, nqn string) *procTarget {
	t.Helper()
	p := &procTarget{addr: addr, dir: dir, nqn: nqn}
	p.cmd = exec.Command(bin, "target", "serve", "--dir", dir, "--listen", addr, "--nqn", nqn,
		"--ns", "d0:96MiB", "--allow-host", "any")
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("target %s never listened on %s: %v", nqn, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *procTarget) kill() {
	if !p.dead {
		p.dead = true
		_ = p.cmd.Process.Kill() // SIGKILL
		_ = p.cmd.Wait()
	}
}

// workload runs verified random IO on four quarters of m until stop.
func workload(t *testing.T, m *Mapped, model []byte, stop <-chan struct{}) *sync.WaitGroup {
	wg, _ := workloadOn(t, []blockdev.Device{m.Volume}, model, 100, false, stop)
	return wg
}

// workloadOn runs verified random IO (with a Flush after every batch when
// flush is set) on four quarters of the device (four workers spread over
// devs, which all show the same data) until stop. It returns the workers and
// a count of the operations done. Any error or mismatch fails t.
func workloadOn(t *testing.T, devs []blockdev.Device, model []byte, seed int64, flush bool, stop <-chan struct{}) (*sync.WaitGroup, *atomic.Int64) {
	var wg sync.WaitGroup
	q := int64(len(model) / 4)
	done := new(atomic.Int64)
	// If the test ends early (t.Fatal), stop the workers before it is over:
	// a worker reporting to a finished test panics the whole binary.
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit); wg.Wait() })
	for w := int64(0); w < 4; w++ {
		dev := devs[int(w)%len(devs)]
		wg.Go(func() {
			rng := rand.New(rand.NewSource(seed + w))
			for {
				select {
				case <-stop:
					return
				case <-quit:
					return
				default:
				}
				randomIO(t, dev, model[w*q:(w+1)*q], w*q, rng, 12, done)
				if !flush {
					continue
				}
				if err := dev.Flush(context.Background()); err != nil {
					t.Errorf("flush: %v", err)
				}
			}
		})
	}
	return &wg, done
}

// serveNBDClients serves dev over NBD on 127.0.0.1 (the project's server,
// as `nvstripe agent` serves a mapping) and connects n test clients to it;
// all stop when the test ends.
func serveNBDClients(t *testing.T, dev blockdev.Device, n int) []blockdev.Device {
	t.Helper()
	srv, err := nbd.NewServer(nbd.Options{Exports: map[string]nbd.Export{"v": {Device: dev}}})
	if err != nil {
		t.Fatal(err)
	}
	addr := testutil.ServeListener(t, srv.Serve)
	var out []blockdev.Device
	for range n {
		c, err := nbdtest.Dial(t.Context(), "tcp", addr, "v")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if c.Size() != dev.Size() {
			t.Fatalf("NBD export of %d bytes, volume of %d", c.Size(), dev.Size())
		}
		out = append(out, c)
	}
	return out
}

// victimWithShards returns a live target holding a shard of m.
func victimWithShards(t *testing.T, m *Mapped, procs []*procTarget) int {
	t.Helper()
	segs, _, err := m.Map.Segments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range segs {
		for _, sl := range rec.Slots {
			var i int
			if _, err := fmt.Sscanf(sl.NS, "h%d-n1", &i); err == nil && !procs[i].dead {
				return i
			}
		}
	}
	t.Fatal("no live target holds a shard")
	return 0
}

// verifyThrough reads the whole device in 1 MiB requests and compares it
// with model.
func verifyThrough(t *testing.T, dev blockdev.Device, model []byte, what string) {
	t.Helper()
	got := make([]byte, 1<<20)
	for off := 0; off < len(model); off += len(got) {
		n := min(len(got), len(model)-off)
		if err := dev.ReadAt(context.Background(), got[:n], int64(off)); err != nil {
			t.Fatalf("%s: read %d+%d: %v", what, off, n, err)
		}
		if !bytes.Equal(got[:n], model[off:off+n]) {
			t.Fatalf("%s: data at %d+%d differs from what was written", what, off, n)
		}
	}
}

// TestProcessTargetsKilledAndRebuilt runs nine `nvstripe target serve`
// processes under a mapped 4+2 volume served over NBD (package nbd on
// 127.0.0.1, driven by two nbdtest clients with requests in flight) and a
// controller probing the targets over TCP. Three times, each after the
// previous rebuild: a target holding shards is killed with SIGKILL while a
// verified workload with flushes runs through NBD; the workload sees no
// error; the controller marks the namespace down, then out (nothing is
// forced); the owner rebuilds through its task records; every segment again
// has six shards on six distinct hosts, all in service; no slot leaks; the
// whole volume verifies through NBD. Nine targets, so that after the third
// death six hosts remain and the third rebuild can still place every shard
// on a distinct host.
func TestProcessTargetsKilledAndRebuilt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the nvstripe binary and runs nine target processes; not in -short")
	}
	pc := startProcCluster(t, 9)
	store, procs := pc.store, pc.procs
	ctx := context.Background()
	tc := &testCluster{store: store}
	const size = 64 << 20
	if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: size, Layout: meta.Layout{K: 4, M: 2, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	m, err := OpenVolume(ctx, store, "v", OpenOptions{Holder: "node1",
		Namespaces: NamespaceOptions{ControllerLossTimeout: time.Second, ConnectTimeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	clients := serveNBDClients(t, m.Volume, 2)
	model := make([]byte, size)
	rand.New(rand.NewSource(3)).Read(model)
	for off := 0; off < size; off += 8 << 20 {
		if err := clients[0].WriteAt(ctx, model[off:off+8<<20], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	sctx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	go m.ServeTasks(sctx, store, TaskOptions{Holder: "node1", Interval: 100 * time.Millisecond})
	runController(t, store)

	for round := range 3 {
		stop := make(chan struct{})
		// The workers flush after every batch, while shards move too.
		wg, ops := workloadOn(t, clients, model, int64(100+10*round), true, stop)
		waitUntil(t, "the workload under way", func() bool { return ops.Load() >= 48 })
		victim := victimWithShards(t, m, procs)
		before := ops.Load()
		procs[victim].kill()
		t.Logf("round %d: killed target h%d", round+1, victim)
		waitRebuilt(t, store, fmt.Sprintf("h%d-n1", victim))
		close(stop)
		wg.Wait()
		if ops.Load() == before {
			t.Fatalf("round %d: the workload did nothing between the kill and the end of the rebuild", round+1)
		}
		t.Logf("round %d: h%d-n1 out and rebuilt; %d verified operations through NBD, %d of them after the kill", round+1, victim, ops.Load(), ops.Load()-before)
		if t.Failed() {
			t.FailNow() // the workload saw an error
		}
		for _, c := range clients {
			if err := c.Flush(ctx); err != nil {
				t.Fatalf("round %d: flush through NBD: %v", round+1, err)
			}
		}
		tc.checkDistinctHosts(t, m)
		checkNoLeakedSlots(t, store)
		verifyThrough(t, clients[1], model, fmt.Sprintf("round %d", round+1))
	}
}
