package controller

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/health"
)

// maxQueued bounds the events a Gossip queues between two runner ticks (a
// controller that does not lead takes none). Past it the oldest are dropped:
// the latest state of every member is kept apart, so a dropped event only
// costs flap history.
const maxQueued = 4096

// Gossip carries a health.Node's membership events to a Runner: pass its
// OnEvent as health.Config.OnEvent and the Gossip as RunnerConfig.Gossip.
//
// OnEvent only stamps and queues (it runs under memberlist's lock and must
// return at once); the runner takes the queue at each tick and feeds its
// tracker in its own goroutine, which keeps the tracker serialised. Only
// members with RoleTarget matter: a host with such a member is judged by
// gossip from then on, for as long as this Gossip lives, also while the
// member is dead. Gossip is safe for concurrent use.
type Gossip struct {
	now func() time.Time

	mu      sync.Mutex
	queued  []memberEvent          // since the runner last took them
	latest  map[string]memberEvent // every target member's last event, by member name
	metas   map[string]health.Meta // last decoded Meta by member name
	dropped int                    // events dropped from a full queue
}

// memberEvent is a target member's membership change and when it was seen.
type memberEvent struct {
	name  string
	host  string
	alive bool
	at    time.Time
}

// NewGossip returns an empty Gossip whose events are stamped with now
// (default time.Now; a Runner's RunnerConfig.Now should read the same clock).
func NewGossip(now func() time.Time) *Gossip {
	if now == nil {
		now = time.Now
	}
	return &Gossip{now: now, latest: map[string]memberEvent{}, metas: map[string]health.Meta{}}
}

// OnEvent records one membership change; it is health.Config.OnEvent. An
// event without Meta (memberlist reports a departure with the last Meta it
// had, but a member whose Meta did not decode has none) is matched to the
// member's last known Meta. Events of agents and controllers are ignored.
func (g *Gossip) OnEvent(m health.Member) {
	at := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.Meta.Role != 0 {
		g.metas[m.Name] = m.Meta
	}
	meta, ok := g.metas[m.Name]
	if !ok || meta.Role != health.RoleTarget || meta.Host == "" {
		return
	}
	ev := memberEvent{name: m.Name, host: meta.Host, alive: m.Status != health.StatusDead, at: at}
	if m.Status == health.StatusSuspect {
		ev.alive = true // suspicion is not silence: memberlist declares dead in time
	}
	g.latest[m.Name] = ev
	if len(g.queued) >= maxQueued {
		g.queued = slices.Delete(g.queued, 0, 1)
		g.dropped++
	}
	g.queued = append(g.queued, ev)
}

// take returns the queued events, oldest first, and empties the queue.
func (g *Gossip) take() []memberEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.queued
	g.queued = nil
	return out
}

// resume empties the queue and returns every target member's last event,
// oldest first: what a runner that starts to lead with a fresh tracker needs.
func (g *Gossip) resume() []memberEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queued = nil
	out := make([]memberEvent, 0, len(g.latest))
	for _, ev := range g.latest {
		out = append(out, ev)
	}
	slices.SortFunc(out, func(a, b memberEvent) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// Dropped returns how many events a full queue has dropped.
func (g *Gossip) Dropped() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dropped
}
