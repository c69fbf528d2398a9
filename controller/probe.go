package controller

import (
	"context"
	"net"
	"slices"
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
	return ProbeTCPFrom(timeout, "")
}

// ProbeTCPFrom is ProbeTCP with connections leaving from the local IP
// address hostTraddr (the one the controller's moves use, "": any).
func ProbeTCPFrom(timeout time.Duration, hostTraddr string) func(ctx context.Context, ns *meta.NamespaceRecord) bool {
	return func(ctx context.Context, ns *meta.NamespaceRecord) bool {
		d := net.Dialer{Timeout: timeout}
		if ip := net.ParseIP(hostTraddr); ip != nil {
			d.LocalAddr = &net.TCPAddr{IP: ip}
		}
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

// liveness feeds the tracker what this tick learned — the gossip events
// queued since the last tick, then TCP probes of the hosts gossip does not
// judge — and applies its transitions: a host down past Grace puts its
// namespaces that are in service down; one back up puts its down and out
// ones back in (an out one with a note of how: returnOut). Failed ones are
// left alone: they are cleared by an operator.
func (r *Runner) liveness(ctx context.Context, snap *Snapshot, now time.Time) {
	hosts := map[string][]*meta.NamespaceRecord{}
	for _, n := range snap.Namespaces {
		hosts[n.Host] = append(hosts[n.Host], n)
	}
	for _, nss := range hosts {
		slices.SortFunc(nss, func(a, b *meta.NamespaceRecord) int { return strings.Compare(a.ID, b.ID) })
	}
	r.observeGossip(hosts, now)
	if r.cfg.Probe != nil && !r.probe(ctx, hosts, now) {
		return
	}
	r.observed = now
	for _, tr := range r.tracker.Tick(now) {
		r.transition(ctx, snap, tr)
	}
}

// observeGossip feeds the tracker the queued gossip events, each at the
// time it was seen, then the current state of every host gossip judges.
// A host is alive while one of its target members is.
func (r *Runner) observeGossip(hosts map[string][]*meta.NamespaceRecord, now time.Time) {
	if r.cfg.Gossip == nil {
		return
	}
	var evs []memberEvent
	if r.gossipResume {
		evs, r.gossipResume = r.cfg.Gossip.resume(), false
	} else {
		evs = r.cfg.Gossip.take()
	}
	for _, ev := range evs {
		ms := r.gossipHosts[ev.host]
		if ms == nil {
			ms = map[string]bool{}
			r.gossipHosts[ev.host] = ms
			r.cfg.Logf("host %s: judged by gossip from now on (target member %s)", ev.host, ev.name)
		}
		ms[ev.name] = ev.alive
		at := ev.at
		if at.Before(r.observed) {
			at = r.observed // the tracker's clock never runs back
		}
		if at.After(now) {
			at = now
		}
		r.observed = at
		r.tracker.Observe(hostMember(ev.host, hosts[ev.host], anyAlive(ms)), at)
	}
	for h, ms := range r.gossipHosts {
		if nss, ok := hosts[h]; ok {
			r.tracker.Observe(hostMember(h, nss, anyAlive(ms)), now) // namespaces added since
		}
	}
}

func anyAlive(ms map[string]bool) bool {
	for _, alive := range ms {
		if alive {
			return true
		}
	}
	return false
}

// hostMember is the tracker's member for a host: named after it, serving
// its namespaces.
func hostMember(host string, nss []*meta.NamespaceRecord, alive bool) health.Member {
	m := health.Member{Name: host, Status: health.StatusDead, Meta: health.Meta{Role: health.RoleTarget, Host: host}}
	if alive {
		m.Status = health.StatusAlive
	}
	for _, n := range nss {
		m.Meta.Namespaces = append(m.Meta.Namespaces, n.ID)
	}
	return m
}

// probe asks every host that gossip does not judge whether it is alive (a
// host is when one of its namespaces answers) and feeds the answers to the
// tracker. It returns false when ctx ended meanwhile.
func (r *Runner) probe(ctx context.Context, hosts map[string][]*meta.NamespaceRecord, now time.Time) bool {
	alive := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for h, nss := range hosts {
		if r.gossipHosts[h] != nil {
			continue
		}
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
		return false
	}
	for h, ok := range alive {
		r.tracker.Observe(hostMember(h, hosts[h], ok), now)
	}
	return true
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
	by := "probe"
	if r.gossipHosts[tr.Host] != nil {
		by = "gossip"
	}
	for _, id := range tr.Namespaces {
		n := snap.Namespaces[id]
		if n != nil && tr.To == health.StateUp && n.State == placement.StateOut.String() {
			r.returnOut(ctx, snap, id, tr)
			continue
		}
		if n == nil || n.State != from.String() {
			continue
		}
		if err := r.cfg.Store.SetNamespaceState(ctx, id, to); err != nil {
			r.cfg.Logf("namespace %s: %v", id, err)
			continue
		}
		r.cfg.Logf("namespace %s: host %s %s by %s, %s -> %s", id, tr.Host, tr.To, by, from, to)
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

// returnOut puts out namespace id back in service: its host is alive
// again. The slots it still holds are reinstated (the stale log names what
// they missed; in-flight rebuilds of its shards go on and free them when
// they commit); one whose slots were all rebuilt elsewhere comes back empty.
func (r *Runner) returnOut(ctx context.Context, snap *Snapshot, id string, tr health.Transition) {
	back, err := r.cfg.Store.ReturnNamespace(ctx, id, tr.At)
	if err != nil || back == nil {
		if err != nil {
			r.cfg.Logf("namespace %s: host %s is back, but: %v", id, tr.Host, err)
		}
		return
	}
	r.cfg.Logf("namespace %s (host %s) %s", id, tr.Host, back.Note())
	n := snap.Namespaces[id]
	n.State, n.Returned = placement.StateIn.String(), back
	for i := range snap.State.Namespaces {
		if snap.State.Namespaces[i].ID == id {
			snap.State.Namespaces[i].State = placement.StateIn
		}
	}
	r.mu.Lock()
	r.nsSeen[id] = nsSeen{state: placement.StateIn, since: tr.At}
	r.mu.Unlock()
}
