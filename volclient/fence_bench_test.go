package volclient

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/cputime"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
	"github.com/nvstripe/nvstripe/volclient/volclienttest"
	"github.com/nvstripe/nvstripe/volume"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// benchTargets starts a store and six in-memory userspace targets of nsSize
// bytes, labelled for the cluster.
func benchTargets(b *testing.B, nsSize, slotSize int64) (*meta.Store, *meta.ClusterRecord, []string) {
	b.Helper()
	store, c := benchStore(b, slotSize)
	var ids []string
	for i := range 6 {
		mem, err := blockdev.NewMem(nsSize, 4096)
		if err != nil {
			b.Fatal(err)
		}
		_, rec := volclienttest.ServeNamespace(b, store, c, i, mem)
		ids = append(ids, rec.ID)
	}
	return store, c, ids
}

// cpuTime is the process's user plus system CPU time so far.
var cpuTime = cputime.Self

// BenchmarkSessionDataPath is the A/B of the ownership protocol on the data
// path: a 4+2 volume over six NVMe/TCP targets (in process), driven through
// the project's NBD server by an NBD client with 8 requests of 1 MiB in
// flight, its namespaces opened without a session ("plain": the node's host
// ID, no claim, no fence watch) or with one ("session": claimed, each
// namespace behind the fence watch). Run with -count N: the two variants
// alternate. Reports MB/s and CPU seconds per GiB (the whole process:
// client, server, volume, initiator and targets).
func BenchmarkSessionDataPath(b *testing.B) {
	const size = 64 << 20
	store, c, ids := benchTargets(b, 96<<20, 4<<20)
	for _, mode := range []string{"plain", "session"} {
		for _, op := range []string{"write", "read"} {
			b.Run(mode+"/"+op, func(b *testing.B) {
				var s *Session
				if mode == "session" {
					s = NewSession(c, "bench", 1000, func(error) {})
				}
				client := benchNBD(b, store, ids, s, size, false)
				benchIO(b, client, op == "write", size)
			})
		}
	}
}

// benchNBD puts a volume over namespaces ids (as session s; nil: none;
// with checksums when csum) behind an NBD server and returns a client of
// it, the volume written once.
func benchNBD(b *testing.B, store *meta.Store, ids []string, s *Session, size int64, csum bool) blockdev.Device {
	b.Helper()
	ctx := context.Background()
	devs, err := NewNamespaces(ctx, store, NamespaceOptions{Session: s})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { devs.Close() })
	slots := map[string]int64{}
	for _, id := range ids {
		slots[id] = 23 // 96 MiB / 4 MiB less the label's slot
	}
	g := layout.Geometry{K: 4, M: 2, Chunk: 128 << 10, SlotSize: 4 << 20, Checksums: csum}
	vol, err := volume.New(volume.Options{Geometry: g, Size: size, Devices: devs,
		Alloc: pastLabel{volume.NewMemAllocator(g.N(), slots)}, Dirty: volume.NewMemDirtyLog(), Stale: volume.NewMemStaleLog()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { vol.Close() })
	srv, err := nbd.NewServer(nbd.Options{Exports: map[string]nbd.Export{"v": {Device: vol}}})
	if err != nil {
		b.Fatal(err)
	}
	client, err := nbdtest.Dial(ctx, "tcp", testutil.ServeListener(b, srv.Serve), "v")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		if err := client.WriteAt(ctx, buf, off); err != nil {
			b.Fatal(err)
		}
	}
	return client
}

// pastLabel is a MemAllocator whose slot indexes start at 1: slot 0 of
// every namespace holds its label.
type pastLabel struct{ *volume.MemAllocator }

func (p pastLabel) Lookup(ctx context.Context, seg int64) ([]volume.SlotRef, bool, error) {
	s, ok, err := p.MemAllocator.Lookup(ctx, seg)
	return shift(s), ok, err
}

func (p pastLabel) Allocate(ctx context.Context, seg int64) ([]volume.SlotRef, error) {
	s, err := p.MemAllocator.Allocate(ctx, seg)
	return shift(s), err
}

func shift(s []volume.SlotRef) []volume.SlotRef {
	for i := range s {
		s[i].Slot++
	}
	return s
}

// benchIO writes or reads the whole of dev in 1 MiB requests, 8 in
// flight, per iteration.
func benchIO(b *testing.B, dev blockdev.Device, write bool, size int64) {
	const req, depth = 1 << 20, 8
	b.SetBytes(size)
	cpu0 := cpuTime()
	for b.Loop() {
		var wg sync.WaitGroup
		for w := range depth {
			wg.Go(func() {
				buf := make([]byte, req)
				for off := int64(w) * req; off < size; off += depth * req {
					var err error
					if write {
						err = dev.WriteAt(context.Background(), buf, off)
					} else {
						err = dev.ReadAt(context.Background(), buf, off)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	gib := float64(size) * float64(b.N) / (1 << 30)
	b.ReportMetric((cpuTime()-cpu0).Seconds()/gib, "cpu-s/GiB")
}

// BenchmarkTakeOverVolume measures a takeover end to end through
// OpenVolume: owner A of a 4+2 volume over six NVMe/TCP targets unmaps
// while a session with A's identity keeps its connections (a paused
// process); B opens the volume (etcd lease, claims on every namespace,
// resync); the figure is the time from B's OpenVolume call to the first of
// A's writes the storage refuses, writing to every namespace in turn.
func BenchmarkTakeOverVolume(b *testing.B) {
	ctx := context.Background()
	store, c, ids := benchTargets(b, 96<<20, 4<<20)
	if _, err := store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: 32 << 20, Layout: meta.Layout{K: 4, M: 2, Chunk: 128 << 10}}); err != nil {
		b.Fatal(err)
	}
	opts := OpenOptions{Holder: "bench"}
	m, err := OpenVolume(ctx, store, "v", opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Volume.WriteAt(ctx, make([]byte, 32<<20), 0); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for b.Loop() {
		stale := staleSession(b, store, c, m, ids)
		if err := m.Close(ctx); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		m, err = OpenVolume(ctx, store, "v", opts)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; ; i++ {
			err := stale[i%len(stale)].WriteAt(ctx, make([]byte, 4096), 4<<20)
			if blockdev.Class(err) == blockdev.ErrFenced {
				break
			}
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/takeover")
	m.Close(ctx)
}

// staleSession opens every namespace with the session of m's owner, as
// m's own process would keep them if it were paused.
func staleSession(b *testing.B, store *meta.Store, c *meta.ClusterRecord, m *Mapped, ids []string) []blockdev.Device {
	b.Helper()
	n, err := NewNamespaces(context.Background(), store, NamespaceOptions{
		Session: NewSession(c, m.Record.Name, m.Owner.Epoch(), func(error) {})})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	var out []blockdev.Device
	for _, id := range ids {
		d, err := n.Device(context.Background(), id)
		if err != nil {
			b.Fatal(fmt.Errorf("stale session on %s: %w", id, err))
		}
		out = append(out, d)
	}
	return out
}
