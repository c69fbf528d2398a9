package volclient

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// procMap is one foreground `nvstripe map --nbd-listen` process and an NBD
// client of it.
type procMap struct {
	cmd    *exec.Cmd
	client *nbdtest.Client
	exited chan struct{}   // closed when the process has exited
	log    testutil.Buffer // its standard error, also copied to the test's
}

// startProcMap maps volume vol in a `nvstripe map` process holding the
// lease as holder with TTL ttl, waits until it serves, and connects; extra
// are more arguments of map (--read-only).
func startProcMap(t *testing.T, bin, etcd, vol, holder string, ttl time.Duration, extra ...string) *procMap {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"map", vol, "--nbd-listen", addr, "--holder", holder, "--lease-ttl", ttl.String(), "--etcd", etcd}, extra...)
	cmd := exec.Command(bin, args...)
	p := &procMap{cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(os.Stderr, &p.log)
	out := testutil.StartStdout(t, cmd)
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "serving:") {
				close(serving)
			}
		}
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-p.exited
	})
	select {
	case <-serving:
	case <-p.exited:
		t.Fatalf("map %s as %s exited before serving: %v", vol, holder, cmd.ProcessState)
	case <-time.After(time.Minute): // a hang guard
		t.Fatalf("map %s as %s never served", vol, holder)
	}
	client, err := nbdtest.Dial(t.Context(), "tcp", addr, vol)
	if err != nil {
		t.Fatal(err)
	}
	p.client = client
	t.Cleanup(func() { p.client.Close() })
	return p
}

// staleWriters writes 1 MiB blocks of byte fill at random offsets of dev in
// n goroutines, each until its first error. wrote counts the writes issued
// after *resumed turned true that succeeded: a stale owner's writes that
// the storage took.
type staleWriters struct {
	wg        sync.WaitGroup
	ok        atomic.Int64
	resumed   atomic.Bool
	afterOK   atomic.Int64
	mu        sync.Mutex
	errs      []error
	remaining atomic.Int32
}

func startStaleWriters(dev blockdev.Device, n int, seed int64) *staleWriters {
	w := &staleWriters{}
	w.remaining.Store(int32(n))
	blocks := dev.Size() >> 20
	for i := range n {
		w.wg.Go(func() {
			defer w.remaining.Add(-1)
			rng := rand.New(rand.NewSource(seed + int64(i)))
			b := bytes.Repeat([]byte{0xA0 + byte(i)}, 1<<20)
			for {
				after := w.resumed.Load()
				err := dev.WriteAt(context.Background(), b, rng.Int63n(blocks)<<20)
				if err != nil {
					w.mu.Lock()
					w.errs = append(w.errs, err)
					w.mu.Unlock()
					return
				}
				w.ok.Add(1)
				if after {
					w.afterOK.Add(1)
				}
			}
		})
	}
	return w
}

// steadyWriter writes and flushes 256 KiB blocks of dev until stop; any
// error fails t. It returns the count of writes done.
func steadyWriter(t *testing.T, dev blockdev.Device, stop <-chan struct{}) (*sync.WaitGroup, *atomic.Int64) {
	var wg sync.WaitGroup
	n := new(atomic.Int64)
	wg.Go(func() {
		b := bytes.Repeat([]byte{0x77}, 256<<10)
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			off := (i * int64(len(b))) % dev.Size()
			if err := dev.WriteAt(context.Background(), b, off); err != nil {
				t.Errorf("the other volume's owner: write at %d: %v", off, err)
				return
			}
			if err := dev.Flush(context.Background()); err != nil {
				t.Errorf("the other volume's owner: flush: %v", err)
				return
			}
			n.Add(1)
		}
	})
	return &wg, n
}

// TestProcessStaleOwnerFenced is a stale owner's write race over real processes:
// three `nvstripe target serve` processes, volumes mapped by `nvstripe map`
// processes, driven over NBD. Per round, owner A (a 3s lease) of a fresh
// volume is writing 1 MiB blocks (four requests in flight) when it is
// stopped (SIGSTOP) at a random point after its first write; once its lease has expired owner B
// maps the volume, overwrites all of it and flushes; then A is resumed.
// Every byte B wrote must read back from B, A's writers must all end with
// an error, and none of A's writes issued after the resume may succeed.
// Meanwhile a third process owns volume w on the same namespaces and keeps
// writing and flushing: fencing A must not stop it.
//
// NVSTRIPE_FENCE_ROUNDS sets the number of rounds (default 3);
// NVSTRIPE_FENCE_SEED the seed (default: the clock; printed).
func TestProcessStaleOwnerFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nvstripe binary and runs target and map processes; not in -short")
	}
	rounds := envInt(t, "NVSTRIPE_FENCE_ROUNDS", 3)
	seed := int64(envInt(t, "NVSTRIPE_FENCE_SEED", int(time.Now().UnixNano()%1e9)))
	t.Logf("seed %d (NVSTRIPE_FENCE_SEED=%d repeats this run), %d rounds", seed, seed, rounds)
	rng := rand.New(rand.NewSource(seed))
	pc := startProcCluster(t, 3)
	bin, eps, store := pc.bin, pc.eps, pc.store
	ctx := context.Background()
	const size = 16 << 20
	lay := meta.Layout{K: 2, M: 1, Chunk: 64 << 10}
	for _, v := range []string{"w", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9"}[:rounds+1] {
		if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: v, Size: size, Layout: lay}); err != nil {
			t.Fatal(err)
		}
	}
	etcd := strings.Join(eps, ",")
	other := startProcMap(t, bin, etcd, "w", "C", 10*time.Second)
	stopOther := make(chan struct{})
	otherWG, otherN := steadyWriter(t, other.client, stopOther)
	for r := range rounds {
		pause := time.Duration(20+rng.Intn(400)) * time.Millisecond
		vol := fmt.Sprintf("v%d", r)
		t.Run(fmt.Sprintf("%s/pause=%v", vol, pause), func(t *testing.T) {
			staleOwnerRound(t, bin, etcd, store, vol, pause, rng.Int63(), otherN)
		})
	}
	close(stopOther)
	otherWG.Wait()
	if t.Failed() {
		return
	}
	if otherN.Load() == 0 {
		t.Fatal("the other volume's owner wrote nothing")
	}
}

func staleOwnerRound(t *testing.T, bin, etcd string, store *meta.Store, vol string, pause time.Duration, seed int64, otherN *atomic.Int64) {
	ctx := context.Background()
	a := startProcMap(t, bin, etcd, vol, "A", 3*time.Second)
	w := startStaleWriters(a.client, 4, seed)
	waitUntil(t, "A writing", func() bool { return w.ok.Load() > 0 })
	time.Sleep(pause)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Logf("A stopped after %v, %d writes done", pause, w.ok.Load())
	waitUntil(t, "A's lease expired", func() bool {
		owners, err := store.Owners(ctx, vol)
		return err == nil && len(owners) == 0
	})
	otherBefore := otherN.Load()
	start := time.Now()
	b := startProcMap(t, bin, etcd, vol, "B", 10*time.Second)
	// Serving means OpenVolume returned: every namespace is claimed.
	t.Logf("B serving (A fenced on every namespace) %v after its map process started", time.Since(start).Round(time.Millisecond))
	model := make([]byte, b.client.Size())
	rand.New(rand.NewSource(seed)).Read(model)
	for off := 0; off < len(model); off += 1 << 20 {
		if err := b.client.WriteAt(ctx, model[off:off+1<<20], int64(off)); err != nil {
			t.Fatalf("B writes at %d: %v", off, err)
		}
	}
	if err := b.client.Flush(ctx); err != nil {
		t.Fatalf("B flushes: %v", err)
	}
	w.resumed.Store(true)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every writer of A failed", func() bool { return w.remaining.Load() == 0 })
	w.wg.Wait()
	t.Logf("A resumed: its writers ended with %v", w.errs[0])
	if n := w.afterOK.Load(); n != 0 {
		t.Errorf("%d of A's writes issued after it resumed succeeded", n)
	}
	if n := differingMiB(t, b.client, model); n > 0 {
		t.Errorf("B's data after A resumed: %d of its %d MiB differ from what B wrote and flushed", n, len(model)>>20)
	}
	select {
	case <-a.exited:
	case <-time.After(time.Minute): // a hang guard
		t.Error("A kept serving after it was fenced")
	}
	if otherN.Load() == otherBefore {
		t.Error("the other volume's owner made no progress while this one changed owner")
	}
	t.Logf("the other volume's owner meanwhile: %d writes of 256 KiB, each flushed", otherN.Load()-otherBefore)
}

// differingMiB reads dev in 1 MiB blocks and counts those that differ
// from model.
func differingMiB(t *testing.T, dev blockdev.Device, model []byte) int {
	t.Helper()
	got, n := make([]byte, 1<<20), 0
	for off := 0; off < len(model); off += len(got) {
		if err := dev.ReadAt(context.Background(), got, int64(off)); err != nil {
			t.Fatalf("read %d+%d: %v", off, len(got), err)
		}
		if !bytes.Equal(got, model[off:off+len(got)]) {
			n++
		}
	}
	return n
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// TestProcessFenceSurvivesTargetRestart: owner B of a volume over three
// `nvstripe target serve --dir` processes fences the earlier owner A (whose
// session keeps its connections, as a paused process would); the three
// targets are killed and restarted on the same directories and addresses;
// A's session, reconnected, is still refused every write (ErrFenced) while B
// writes, flushes and reads back its data.
func TestProcessFenceSurvivesTargetRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nvstripe binary and runs target processes; not in -short")
	}
	pc := startProcCluster(t, 3)
	bin, store, c, procs := pc.bin, pc.store, pc.c, pc.procs
	ctx := context.Background()
	if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: 8 << 20, Layout: meta.Layout{K: 2, M: 1, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	nsOpts := NamespaceOptions{ControllerLossTimeout: 30 * time.Second, ConnectTimeout: 5 * time.Second}
	a, err := OpenVolume(ctx, store, "v", OpenOptions{Holder: "A", Namespaces: nsOpts})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Volume.WriteAt(ctx, make([]byte, 8<<20), 0); err != nil {
		t.Fatal(err)
	}
	// A's identity on the storage, kept past A's unmap: the stale writer.
	staleOpts := nsOpts
	staleOpts.Session = NewSession(c, "v", a.Owner.Epoch(), func(error) {})
	stale, err := NewNamespaces(ctx, store, staleOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	var staleDevs []blockdev.Device
	for i := range 3 {
		d, err := stale.Device(ctx, fmt.Sprintf("h%d-n1", i))
		if err != nil {
			t.Fatalf("A's session on h%d-n1: %v", i, err)
		}
		staleDevs = append(staleDevs, d)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := OpenVolume(ctx, store, "v", OpenOptions{Holder: "B", Namespaces: nsOpts})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	checkStale := func(when string) {
		t.Helper()
		for i, d := range staleDevs {
			if err := d.WriteAt(ctx, make([]byte, 4096), 8<<20); blockdev.Class(err) != blockdev.ErrFenced {
				t.Fatalf("%s: A's write to h%d-n1: %v, want ErrFenced", when, i, err)
			}
		}
	}
	checkStale("before the restart")
	for _, p := range procs {
		p.kill()
	}
	for i, p := range procs {
		procs[i] = runProcTarget(t, bin, p.dir, p.addr, p.nqn)
	}
	model := make([]byte, 8<<20)
	rand.New(rand.NewSource(1)).Read(model)
	if err := b.Volume.WriteAt(ctx, model, 0); err != nil {
		t.Fatalf("B writes after the restart: %v", err)
	}
	if err := b.Volume.Flush(ctx); err != nil {
		t.Fatalf("B flushes after the restart: %v", err)
	}
	checkStale("after the targets restarted")
	verifyThrough(t, b.Volume, model, "B's data after the restart")
}
