package volclient

import (
	"bufio"
	"context"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
)

// reacquireTTL is the lease TTL of the maps below; etcdOutage, how long
// they stop etcd: past the TTL, so that every lease runs out meanwhile.
const (
	reacquireTTL = 3 * time.Second
	etcdOutage   = 3 * reacquireTTL
)

// etcdProc is an `nvstripe etcd` process: one the tests can SIGSTOP.
type etcdProc struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
}

// startEtcdProc runs `nvstripe etcd` of bin and waits until it is ready.
func startEtcdProc(t *testing.T, bin string) *etcdProc {
	t.Helper()
	e := &etcdProc{url: freeAddr(t), exited: make(chan struct{})}
	e.cmd = exec.Command(bin, "etcd", "--dir", filepath.Join(t.TempDir(), "etcd"), "--listen", e.url, "--peer-listen", freeAddr(t))
	e.cmd.Stderr = os.Stderr
	out, err := e.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(e.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "etcd ready") {
				close(ready)
			}
		}
		_ = e.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = e.cmd.Process.Signal(syscall.SIGCONT)
		_ = e.cmd.Process.Kill()
		<-e.exited
	})
	select {
	case <-ready:
	case <-e.exited:
		t.Fatalf("etcd exited before it was ready: %v", e.cmd.ProcessState)
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("etcd never got ready")
	}
	return e
}

// signal sends sig to the process or fails the test.
func signal(t *testing.T, p *os.Process, sig syscall.Signal) {
	t.Helper()
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// stopFor stops etcd (SIGSTOP) for d and lets it go on (SIGCONT).
func (e *etcdProc) stopFor(t *testing.T, d time.Duration) {
	t.Helper()
	signal(t, e.cmd.Process, syscall.SIGSTOP)
	time.Sleep(d)
	signal(t, e.cmd.Process, syscall.SIGCONT)
}

// outageCluster is etcd run as an `nvstripe etcd` process, an initialized
// cluster in it and three target processes.
type outageCluster struct {
	*procCluster
	etcd *etcdProc
}

// volume creates a 2+1 volume of 8 MiB.
func (c *outageCluster) volume(t *testing.T, name string) {
	t.Helper()
	spec := meta.VolumeSpec{Name: name, Size: 8 << 20, Layout: meta.Layout{K: 2, M: 1, Chunk: 64 << 10}}
	if _, err := c.store.CreateVolume(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
}

// TestProcessEtcdOutage runs foreground maps (processes) across etcd
// outages: stopped (SIGSTOP) for three times their lease TTL.
func TestProcessEtcdOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the nvstripe binary and runs etcd, target and map processes; not in -short")
	}
	bin := buildNvstripe(t)
	e := startEtcdProc(t, bin)
	c := &outageCluster{procCluster: startProcClusterOn(t, bin, []string{e.url}, 3), etcd: e}
	t.Run("reacquires", func(t *testing.T) { mapReacquires(t, c, "v", false) })
	t.Run("reacquires after compaction", func(t *testing.T) { mapReacquires(t, c, "u", true) })
	t.Run("taken over", func(t *testing.T) { fencedMapTakenOver(t, c, "w", false) })
	t.Run("taken over and given back", func(t *testing.T) { fencedMapTakenOver(t, c, "x", true) })
}

// rwOwner returns the read-write owner of volume v, or ok false.
func rwOwner(store *meta.Store, v string) (ow meta.OwnerInfo, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	owners, err := store.Owners(ctx, v)
	if err != nil {
		return ow, false
	}
	for _, o := range owners {
		if o.Mode == meta.ModeRW {
			return o, true
		}
	}
	return ow, false
}

// writeModel writes random bytes over all of the map's volume, flushes,
// and returns them.
func writeModel(t *testing.T, p *procMap, seed int64) []byte {
	t.Helper()
	ctx := context.Background()
	model := make([]byte, p.client.Size())
	rand.New(rand.NewSource(seed)).Read(model)
	if err := p.client.WriteAt(ctx, model, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.client.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return model
}

// mapReacquires: a foreground `nvstripe map` (read-write, over NBD, 3 s
// lease) writes and flushes; etcd is stopped for three TTLs, so the lease
// runs out and the mapping fences itself; once etcd goes on, the same
// process takes the volume again with a higher epoch, and the same NBD
// connection reads the earlier data back and writes again. With compact,
// etcd's history up to before the outage is compacted away first, as the
// periodic compaction of `nvstripe etcd` (5 minutes) does under a mapping
// that has run longer than that.
func mapReacquires(t *testing.T, pc *outageCluster, v string, compact bool) {
	pc.volume(t, v)
	a := startProcMap(t, pc.bin, pc.etcd.url, v, "A", reacquireTTL)
	model := writeModel(t, a, 1)
	if compact {
		metatest.Compact(t, []string{pc.etcd.url})
	}
	before, ok := rwOwner(pc.store, v)
	if !ok || before.Holder != "A" {
		t.Fatalf("owner before the outage: %+v (found %v), want A", before, ok)
	}
	pc.etcd.stopFor(t, etcdOutage)
	waitUntil(t, "A fenced", func() bool { return strings.Contains(a.log.String(), "fenced") })
	var after meta.OwnerInfo
	waitUntil(t, "A owning the volume again", func() bool {
		after, ok = rwOwner(pc.store, v)
		return ok && after.Epoch > before.Epoch
	})
	if after.Holder != "A" {
		t.Fatalf("%s taken after the outage by %s, want A", v, after.Holder)
	}
	// The owner key is written before the volume is opened and served.
	waitUntil(t, "A serving again", func() bool { return strings.Contains(a.log.String(), "serving again") })
	select {
	case <-a.exited:
		t.Fatalf("map A exited: %v", a.cmd.ProcessState)
	default:
	}
	t.Logf("A took %s again: epoch %d, was %d", v, after.Epoch, before.Epoch)
	verifyThrough(t, a.client, model, "A after taking its volume again")
	model = writeModel(t, a, 2)
	verifyThrough(t, a.client, model, "A's writes after taking its volume again")
}

// fencedMapTakenOver: a foreground map A fenced by an etcd outage is
// paused (SIGSTOP) before it can take its volume again; B maps the volume
// read-write and writes; A, let go on, finds B owning it: it stays fenced,
// says who holds the volume, ends, and B's data stays as B wrote it. With
// unmapB, B unmaps before A goes on and etcd's history is compacted, so
// only the record of the last read-write owner tells A about B.
func fencedMapTakenOver(t *testing.T, pc *outageCluster, v string, unmapB bool) {
	pc.volume(t, v)
	e := pc.etcd
	a := startProcMap(t, pc.bin, e.url, v, "A", reacquireTTL)
	writeModel(t, a, 1)
	signal(t, e.cmd.Process, syscall.SIGSTOP)
	waitUntil(t, "A fenced", func() bool { return strings.Contains(a.log.String(), "fenced") })
	signal(t, a.cmd.Process, syscall.SIGSTOP)
	signal(t, e.cmd.Process, syscall.SIGCONT)
	waitUntil(t, "A's lease gone", func() bool {
		_, owned := rwOwner(pc.store, v)
		return !owned
	})
	b := startProcMap(t, pc.bin, e.url, v, "B", 10*time.Second)
	model := writeModel(t, b, 2)
	if unmapB {
		signal(t, b.cmd.Process, syscall.SIGINT)
		<-b.exited
		metatest.Compact(t, []string{e.url})
	}
	signal(t, a.cmd.Process, syscall.SIGCONT)
	ctx := context.Background()
	if err := a.client.WriteAt(ctx, make([]byte, 64<<10), 0); err == nil {
		if err := a.client.Flush(ctx); err == nil {
			t.Error("fenced A wrote and flushed over B's volume")
		}
	}
	select {
	case <-a.exited:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("A kept running after B took its volume")
	}
	if log := a.log.String(); !strings.Contains(log, "stays fenced") || !strings.Contains(log, "by B") {
		t.Errorf("A did not say it stays fenced because of B; its log:\n%s", log)
	}
	if unmapB {
		b = startProcMap(t, pc.bin, e.url, v, "C", 10*time.Second)
	} else if ow, _ := rwOwner(pc.store, v); ow.Holder != "B" {
		t.Errorf("%s owned by %q after A ended, want B", v, ow.Holder)
	}
	verifyThrough(t, b.client, model, "B's data after A ended")
}
