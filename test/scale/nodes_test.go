//go:build linux

package scale

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient"
)

// latencies collects durations; Percentile reads them.
type latencies struct {
	mu  sync.Mutex
	d   []time.Duration
	err atomic.Int64
}

func (l *latencies) add(d time.Duration, err error) {
	if err != nil {
		l.err.Add(1)
		return
	}
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// reset drops what was collected.
func (l *latencies) reset() {
	l.mu.Lock()
	l.d = nil
	l.mu.Unlock()
	l.err.Store(0)
}

// percentile is the p-th percentile (0..100) of what was collected, and
// how many there were.
func (l *latencies) percentile(p float64) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))], len(s)
}

// node is one simulated node: it maps its volume through the real
// volclient.OpenVolume and follows the volume record as the agent does
// (a read, then a watch from its revision: agent followSize).
type node struct {
	i     int
	store *meta.Store
	m     *volclient.Mapped
	stop  context.CancelFunc
	done  chan struct{}
}

// open maps the node's volume, timing the open.
func (n *node) open(ctx context.Context, opens, renewals *latencies) error {
	start := time.Now()
	m, err := volclient.OpenVolume(ctx, n.store, volume(n.i), volclient.OpenOptions{
		Holder: fmt.Sprintf("node%05d", n.i),
		// The hosts are records only: every namespace is down, and the
		// mapping's probe of down namespaces (one connection and one
		// etcd read each) is not what a healthy node does every 10s.
		RecheckInterval: time.Hour,
		OnRenewal:       renewals.add,
	})
	opens.add(time.Since(start), err)
	if err != nil {
		return fmt.Errorf("node %d: %w", n.i, err)
	}
	fctx, cancel := context.WithCancel(context.Background())
	n.m, n.stop, n.done = m, cancel, make(chan struct{})
	go n.follow(fctx)
	return nil
}

// follow reads the volume record and watches it from the revision of the
// read, again after a broken watch, until ctx ends.
func (n *node) follow(ctx context.Context) {
	defer close(n.done)
	for ctx.Err() == nil {
		_, rev, err := n.store.VolumeRev(ctx, volume(n.i))
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range n.store.WatchVolume(ctx, volume(n.i), rev) {
			if ev.Err != nil {
				break
			}
		}
	}
}

// close unmaps: stops following, flushes, releases the lease.
func (n *node) close(ctx context.Context) error {
	if n.m == nil {
		return nil
	}
	n.stop()
	<-n.done
	err := n.m.Close(ctx)
	n.m = nil
	return err
}

// storm is a path-state publication after a host failure: every node
// whose volume has a slot on the host records each of the host's paths it
// uses as state, at once, as volclient's path watch does when the paths
// drop (meta.Store.SetPathState). It returns how many nodes published,
// how many paths changed and how many publications failed.
func storm(ctx context.Context, w *world, host int, state string) (nodes, paths, failed int) {
	var wg sync.WaitGroup
	var bad atomic.Int64
	changed := map[string]bool{}
	for i := range w.size.agents {
		var mine []string
		for _, ns := range w.hostNS[host] {
			if w.volNS[i][ns] {
				mine = append(mine, ns)
				changed[ns] = true
			}
		}
		if len(mine) == 0 {
			continue
		}
		nodes++
		wg.Go(func() {
			for _, ns := range mine {
				for _, addr := range w.paths {
					if err := w.store(i).SetPathState(ctx, ns, addr, 0, state); err != nil {
						bad.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	return nodes, len(changed) * len(w.paths), int(bad.Load())
}

// busiestHost is the host whose namespaces the most volumes use.
func busiestHost(w *world) int {
	best, most := 0, -1
	for h, nss := range w.hostNS {
		n := 0
		for i := range w.size.agents {
			for _, ns := range nss {
				if w.volNS[i][ns] {
					n++
					break
				}
			}
		}
		if n > most {
			best, most = h, n
		}
	}
	return best
}
