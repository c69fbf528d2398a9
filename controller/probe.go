package controller

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/placement"
)

// ProbeTCP reports whether one of the namespace's paths accepts a TCP
// connection within timeout: the controller's liveness signal for targets
// that do not gossip. It only connects and closes (no NVMe/TCP exchange).
func ProbeTCP(timeout time.Duration) func(ctx context.Context, ns *meta.NamespaceRecord) bool {
	return func(ctx context.Context, ns *meta.NamespaceRecord) bool {
		d := net.Dialer{Timeout: timeout}
		for _, p := range ns.Paths {
			c, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(p.Addr, "tcp://"))
			if err == nil {
				c.Close()
				return true
			}
		}
		return false
	}
}

// probe asks every host whether it is alive, feeds the answers to the
// tracker and applies its transitions: a host down past Grace puts its
// namespaces that are in service down; one back up puts its down ones back
// in. Out and failed are left alone: they are cleared by an operator.
func (r *Runner) probe(ctx context.Context, snap *Snapshot, now time.Time) {
	hosts := map[string][]*meta.NamespaceRecord{}
	for _, n := range snap.Namespaces {
		hosts[n.Host] = append(hosts[n.Host], n)
	}
	alive := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for h, nss := range hosts {
		wg.Go(func() {
			ok := false
			for _, n := range nss {
				if ok = r.cfg.Probe(ctx, n); ok {
					break
				}
			}
			mu.Lock()
			alive[h] = ok
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	for h, nss := range hosts {
		m := health.Member{Name: h, Status: health.StatusDead, Meta: health.Meta{Role: health.RoleTarget, Host: h}}
		if alive[h] {
			m.Status = health.StatusAlive
		}
		for _, n := range nss {
			m.Meta.Namespaces = append(m.Meta.Namespaces, n.ID)
		}
		r.tracker.Observe(m, now)
	}
	for _, tr := range r.tracker.Tick(now) {
		r.transition(ctx, snap, tr)
	}
}

// transition applies one tracker transition to metadata and snap.
func (r *Runner) transition(ctx context.Context, snap *Snapshot, tr health.Transition) {
	var from, to placement.State
	switch tr.To {
	case health.StateDown:
		from, to = placement.StateIn, placement.StateDown
	case health.StateUp:
		from, to = placement.StateDown, placement.StateIn
	default:
		return
	}
	for _, id := range tr.Namespaces {
		n := snap.Namespaces[id]
		if n == nil || n.State != from.String() {
			continue
		}
		if err := r.cfg.Store.SetNamespaceState(ctx, id, to); err != nil {
			r.cfg.Logf("namespace %s: %v", id, err)
			continue
		}
		r.cfg.Logf("namespace %s: host %s %s, %s -> %s", id, tr.Host, tr.To, from, to)
		n.State = to.String()
		for i := range snap.State.Namespaces {
			if snap.State.Namespaces[i].ID == id {
				snap.State.Namespaces[i].State = to
			}
		}
		r.mu.Lock()
		r.nsSeen[id] = nsSeen{state: to, since: tr.At}
		r.mu.Unlock()
	}
}
