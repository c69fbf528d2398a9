//go:build linux

package scale

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/storetest"
)

// size is one run of the harness.
type size struct {
	agents, hosts   int
	nsPerHost       int
	segments        int   // allocated per volume
	volumeSize      int64 // bytes, per volume (thin)
	agentsPerClient int
}

const (
	nsBytes  = 7_680_000_000_000 / meta.BlockSize * meta.BlockSize // a 7.68 TB drive
	hostRack = 20                                                  // hosts per rack (failure domain)
	workers  = 64                                                  // concurrent setup requests
	// hostsPerBatch hosts' namespaces are recorded by one AddNamespaces:
	// each batch reads every namespace recorded before it.
	hostsPerBatch = 32
	// setupStores create the volumes: each store reloads its view of the
	// whole cluster every SnapshotTTL, megabytes at 1,000 hosts.
	setupStores = 4
)

// world is the cluster the harness built: a store per group of agents,
// the namespaces of each host and the namespaces each volume uses.
type world struct {
	size   size
	stores []*meta.Store
	hostNS [][]string        // namespace ids by host
	volNS  []map[string]bool // namespace ids by volume (agent)
	paths  []string          // every namespace's path addresses
}

// volume is agent i's volume.
func volume(i int) string { return fmt.Sprintf("vol%05d", i) }

// hostName is host i.
func hostName(i int) string { return fmt.Sprintf("h%04d", i) }

// store is the store agent i shares with the others of its group.
func (w *world) store(i int) *meta.Store { return w.stores[i/w.size.agentsPerClient] }

// openStores opens one etcd client per agentsPerClient agents.
func openStores(t *testing.T, endpoint string, sz size) []*meta.Store {
	t.Helper()
	n := (sz.agents + sz.agentsPerClient - 1) / sz.agentsPerClient
	stores := make([]*meta.Store, n)
	for i := range stores {
		stores[i] = storetest.Open(t, meta.Config{Endpoints: []string{endpoint}, Cluster: "scale"})
	}
	return stores
}

// refusingPaths returns two addresses (two paths per namespace) that accept
// and close every connection: the hosts are records only, so a node's
// connection to a namespace fails at once and the volume opens degraded,
// as it would with its targets down.
func refusingPaths(t *testing.T) []string {
	t.Helper()
	refuse := func(c net.Conn) { c.Close() }
	return []string{"tcp://" + testutil.Serve(t, refuse), "tcp://" + testutil.Serve(t, refuse)}
}

// build records the cluster: hosts in racks, their namespaces, the
// agents' volumes and their first segments, placed by the allocator.
func build(t *testing.T, ctx context.Context, w *world) {
	t.Helper()
	start := time.Now()
	s := w.stores[0]
	storetest.Init(t, s, meta.InitOptions{DomainLabel: "rack"})
	sz := w.size
	racks := max(8, sz.hosts/hostRack)
	parallel(t, sz.hosts, func(i int) error {
		_, err := w.stores[i%len(w.stores)].AddHost(ctx, hostName(i), map[string]string{"rack": fmt.Sprintf("r%03d", i%racks)})
		return err
	})
	t.Logf("%d hosts recorded after %v", sz.hosts, time.Since(start).Round(time.Second))
	w.hostNS = make([][]string, sz.hosts)
	batches := (sz.hosts + hostsPerBatch - 1) / hostsPerBatch
	parallel(t, batches, func(b int) error {
		var specs []meta.NamespaceSpec
		for h := b * hostsPerBatch; h < min(sz.hosts, (b+1)*hostsPerBatch); h++ {
			for n := range sz.nsPerHost {
				var paths []meta.PathRecord
				for g, a := range w.paths {
					paths = append(paths, meta.PathRecord{Addr: a, ANAGroup: uint32(g + 1), ANAState: meta.ANAOptimized})
				}
				specs = append(specs, meta.NamespaceSpec{Host: hostName(h), NQN: "nqn.2026-12.io.nvstripe:scale-" + hostName(h),
					NSID: uint32(n + 1), Size: nsBytes, Paths: paths})
			}
		}
		recs, err := w.stores[b%len(w.stores)].AddNamespaces(ctx, specs)
		for k, r := range recs {
			h := b*hostsPerBatch + k/sz.nsPerHost
			w.hostNS[h] = append(w.hostNS[h], r.ID)
		}
		return err
	})
	t.Logf("%d namespaces recorded after %v", sz.hosts*sz.nsPerHost, time.Since(start).Round(time.Second))
	w.volNS = make([]map[string]bool, sz.agents)
	var mu sync.Mutex
	parallel(t, sz.agents, func(i int) error {
		used, err := createVolume(ctx, w.stores[i%min(setupStores, len(w.stores))], volume(i), sz)
		mu.Lock()
		w.volNS[i] = used
		mu.Unlock()
		return err
	})
	t.Logf("%d volumes created, %d segments allocated after %v", sz.agents, sz.agents*sz.segments, time.Since(start).Round(time.Second))
}

// volumeSpec is a volume as `nvstripe volume create --size S` makes it:
// 4+2, 128 KiB chunks, checksums bound to their place, the write log.
func volumeSpec(name string, bytes int64) meta.VolumeSpec {
	return meta.VolumeSpec{Name: name, Size: bytes, BindChecksums: true,
		Layout: meta.Layout{K: 4, M: 2, Chunk: 128 << 10, Checksum: meta.ChecksumCRC32C, WriteLog: meta.WriteLogPPL}}
}

// createVolume creates a volume and allocates its first segments spread
// over it, as first writes do, and returns the namespaces they use.
func createVolume(ctx context.Context, s *meta.Store, name string, sz size) (map[string]bool, error) {
	if _, err := s.CreateVolume(ctx, volumeSpec(name, sz.volumeSize)); err != nil {
		return nil, err
	}
	vm, err := s.VolumeMap(ctx, name, nil)
	if err != nil {
		return nil, err
	}
	c, err := s.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	segs := sz.volumeSize / volumeSpec(name, sz.volumeSize).Layout.Geometry(c.SlotSize).SegmentData()
	used := map[string]bool{}
	for k := range int64(sz.segments) {
		refs, err := vm.Allocate(ctx, k*segs/int64(sz.segments))
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			used[r.NS] = true
		}
	}
	return used, nil
}

// parallel runs fn(0..n-1) on workers goroutines; the first error fails
// the test.
func parallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs <- fmt.Errorf("item %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
