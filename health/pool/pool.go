// Package pool puts a daemon in the health gossip pool and keeps it there:
// Start starts its health.Node and a loop that, while the node sees no other
// member, joins it again through its seeds (the pool may have formed after
// it started, or every other member restarted), and keeps its own seed
// record registered in etcd so that others find the pool the same way.
//
// It is the one home of that loop for every daemon that gossips: a target
// host (`target serve --gossip`, `target agent`) and the controller. It
// lives beside health rather than in controller because targets use it too,
// and outside health because it needs meta (health knows no etcd).
//
// Concurrency: a Member's methods are safe for concurrent use; Leave is
// called once.
package pool

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/meta"
)

// Config configures a Member.
type Config struct {
	// Health configures the node. Its Logf is replaced by Logf less
	// memberlist's debugging lines.
	Health health.Config
	// Join are the seeds to join, IP:PORT. Default: the members registered
	// in etcd (Store).
	Join []string
	// Store opens the store, at each use until it succeeds (so a daemon
	// starts while etcd is unreachable). nil: the member registers no seed
	// record, and without Join it joins no one (others join it).
	Store func(context.Context) (*meta.Store, error)
	// Every is how often the loop looks. Default 5s for health.ProfileLAN,
	// 500ms for the faster profiles.
	Every time.Duration
	// Logf logs what the loop does. Default: discard.
	Logf func(format string, args ...any)
}

// Member is a running member of the gossip pool.
type Member struct {
	node   *health.Node
	cfg    Config
	rec    meta.GossipRecord
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	reg *meta.GossipRegistration
}

// Start starts the node and the loop that keeps it joined and registered.
func Start(cfg Config) (*Member, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	logf := cfg.Logf
	cfg.Health.Logf = func(format string, args ...any) {
		if line := fmt.Sprintf(format, args...); !strings.Contains(line, "[DEBUG]") {
			logf("%s", line)
		}
	}
	if cfg.Every <= 0 {
		cfg.Every = 5 * time.Second
		if cfg.Health.Profile != health.ProfileLAN {
			cfg.Every = 500 * time.Millisecond
		}
	}
	node, err := health.Start(cfg.Health)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Member{node: node, cfg: cfg, cancel: cancel, done: make(chan struct{}),
		rec: meta.GossipRecord{Name: node.Name(), Role: cfg.Health.Meta.Role.String(), Host: cfg.Health.Meta.Host, Addr: node.Addr()}}
	go m.run(ctx)
	return m, nil
}

// Node is the member's gossip node.
func (m *Member) Node() *health.Node { return m.node }

// Addr is the member's gossip address, IP:PORT.
func (m *Member) Addr() string { return m.node.Addr() }

// run joins and registers until ctx ends.
func (m *Member) run(ctx context.Context) {
	defer close(m.done)
	for ctx.Err() == nil {
		if len(m.node.Members()) <= 1 {
			m.join(ctx)
		}
		if m.cfg.Store != nil && m.registration() == nil {
			m.register(ctx)
		}
		t := time.NewTimer(m.cfg.Every)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// seeds returns Join, or the members registered in etcd.
func (m *Member) seeds(ctx context.Context) ([]string, error) {
	if len(m.cfg.Join) > 0 || m.cfg.Store == nil {
		return m.cfg.Join, nil
	}
	s, err := m.cfg.Store(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := s.GossipSeeds(ctx)
	var addrs []string
	for _, r := range recs {
		addrs = append(addrs, r.Addr)
	}
	return addrs, err
}

func (m *Member) join(ctx context.Context) {
	addrs, err := m.seeds(ctx)
	addrs = slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == m.node.Addr() })
	if err != nil || len(addrs) == 0 {
		if err != nil && ctx.Err() == nil {
			m.cfg.Logf("gossip: seeds: %v", err)
		}
		return
	}
	if n, err := m.node.Join(addrs); err != nil {
		m.cfg.Logf("gossip: %v (retrying)", err)
	} else {
		m.cfg.Logf("gossip: %s joined the pool through %d of %v", m.node.Name(), n, addrs)
	}
}

func (m *Member) registration() *meta.GossipRegistration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reg
}

func (m *Member) register(ctx context.Context) {
	s, err := m.cfg.Store(ctx)
	if err == nil {
		var reg *meta.GossipRegistration
		if reg, err = s.RegisterGossip(ctx, m.rec, 0); err == nil {
			m.mu.Lock()
			m.reg = reg
			m.mu.Unlock()
			return
		}
	}
	if ctx.Err() == nil {
		m.cfg.Logf("gossip: registering %s in etcd: %v (retrying)", m.rec.Addr, err)
	}
}

// Leave stops the loop, removes the seed record, leaves the pool (the
// others see this member gone at once instead of after failed probes) and
// shuts the node down.
func (m *Member) Leave() {
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if reg := m.registration(); reg != nil {
		_ = reg.Close(ctx)
	}
	if err := m.node.Leave(2 * time.Second); err != nil {
		m.cfg.Logf("gossip: %v", err)
	}
	_ = m.node.Shutdown()
}
