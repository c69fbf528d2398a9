package agent

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
)

// procTarget is one `nvstripe target serve` process.
type procTarget struct {
	cmd  *exec.Cmd
	addr string
	dead bool
}

// buildNvstripe builds the nvstripe binary into a temporary directory.
func buildNvstripe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nvstripe")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/nvstripe")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProcTarget starts target i as a process serving one file-backed
// namespace, waits until it listens, and records host hI with it.
func startProcTarget(t *testing.T, bin string, store *meta.Store, c *meta.ClusterRecord, i int) *procTarget {
	t.Helper()
	nqn := fmt.Sprintf("nqn.2026-11.io.nvstripe:proc-t%d", i)
	p := &procTarget{addr: freeAddr(t)}
	p.cmd = exec.Command(bin, "target", "serve", "--dir", t.TempDir(), "--listen", p.addr, "--nqn", nqn,
		"--ns", "d0:96MiB", "--allow-host", "any")
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("target %d never listened on %s: %v", i, p.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx := context.Background()
	host := fmt.Sprintf("h%d", i)
	if _, err := store.AddHost(ctx, host, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := store.AddNamespace(ctx, meta.NamespaceSpec{Host: host, NQN: nqn, NSID: 1, Size: 96 << 20,
		Paths: []meta.PathRecord{{Addr: "tcp://" + p.addr, ANAGroup: 1}}})
	if err != nil {
		t.Fatal(err)
	}
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

func (p *procTarget) kill() {
	if !p.dead {
		p.dead = true
		_ = p.cmd.Process.Kill() // SIGKILL
		_ = p.cmd.Wait()
	}
}

// workload runs verified random IO on four quarters of m until stop.
func workload(t *testing.T, m *Mapped, model []byte, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	q := int64(len(model) / 4)
	var done atomic.Int64
	// If the test ends early (t.Fatal), stop the workers before it is over:
	// a worker reporting to a finished test panics the whole binary.
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit); wg.Wait() })
	for w := int64(0); w < 4; w++ {
		wg.Go(func() {
			rng := rand.New(rand.NewSource(w + 100))
			for {
				select {
				case <-stop:
					return
				case <-quit:
					return
				default:
				}
				randomIO(t, m.Volume, model[w*q:(w+1)*q], w*q, rng, 12, &done)
			}
		})
	}
	return &wg
}

// TestProcessTargetsKilledAndRebuilt runs eight `nvstripe target serve`
// processes under a mapped 4+2 volume with a continuous verified workload
// and a controller: a target is killed with SIGKILL, the workload sees no
// error, the controller marks the namespace down then out, the owner
// rebuilds, every segment again has six shards on six distinct hosts;
// then a second target, after the first rebuild. A third kill leaves five
// hosts, too few for 4+2: the volume stays readable, degraded by one.
func TestProcessTargetsKilledAndRebuilt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the nvstripe binary and runs eight target processes; not in -short")
	}
	bin := buildNvstripe(t)
	ctx := context.Background()
	store, err := meta.Open(ctx, meta.Config{Endpoints: metatest.Start(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c, err := store.InitCluster(ctx, meta.InitOptions{SlotSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{store: store}
	var procs []*procTarget
	for i := 0; i < 8; i++ {
		procs = append(procs, startProcTarget(t, bin, store, c, i))
	}
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
	model := fillVolume(t, m, size)
	sctx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	go m.ServeTasks(sctx, store, TaskOptions{Holder: "node1", Interval: 100 * time.Millisecond})
	runController(t, store)
	stop := make(chan struct{})
	wg := workload(t, m, model, stop)

	for round := 0; round < 2; round++ {
		victim := tc.hostWithShards(t, m)
		for procs[victim].dead {
			victim = (victim + 1) % len(procs)
		}
		procs[victim].kill()
		waitRebuilt(t, store, fmt.Sprintf("h%d-n1", victim))
		tc.checkDistinctHosts(t, m)
		checkNoLeakedSlots(t, store)
	}
	for i := range procs {
		if !procs[i].dead {
			procs[i].kill()
			break
		}
	}
	time.Sleep(time.Second) // IO goes on degraded; no rebuild is possible
	close(stop)
	wg.Wait()
	got := make([]byte, size)
	if err := m.Volume.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("final read: err %v, equal %v", err, bytes.Equal(got, model))
	}
}
