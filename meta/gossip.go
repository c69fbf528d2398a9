package meta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Gossip seeds. A daemon in the health gossip pool (package health) may
// register its gossip address so that others join the pool without being
// told an address:
//
//	gossip/<member>   GossipRecord: role, host, gossip address; bound to the member's lease
//
// A record lives while its member renews the lease and vanishes when it
// stops: at once on Close, a TTL after a crash. The records are only seeds
// for joining: membership and liveness come from gossip, never from these
// keys (a record may outlive its member by a TTL, or be missing while etcd
// is unreachable; gossip does not care).

func (k keys) gossips() string             { return k.root + "gossip/" }
func (k keys) gossip(member string) string { return k.gossips() + member }

// GossipRecord is one gossip member's seed record.
type GossipRecord struct {
	versioned
	Name string `json:"name"` // member name in the pool (a meta name)
	Role string `json:"role"` // target, agent or controller
	Host string `json:"host"` // the host it runs on
	Addr string `json:"addr"` // HOST:PORT of its gossip listener
}

func (g *GossipRecord) check() error {
	if err := checkName("gossip member", g.Name); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(g.Addr); err != nil {
		return fmt.Errorf("gossip member %s: address %q: %w", g.Name, g.Addr, err)
	}
	return nil
}

// GossipRegistration keeps a GossipRecord registered until Close. Safe for
// concurrent use.
type GossipRegistration struct {
	s      *Store
	rec    GossipRecord
	ttl    time.Duration
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu    sync.Mutex
	lease clientv3.LeaseID
}

// RegisterGossip writes rec under a lease of ttl (default 10s, at least 2s)
// and renews it in the background. When the lease is lost (etcd was
// unreachable past the TTL) the record is written again under a new lease
// as soon as etcd answers, until Close.
func (s *Store) RegisterGossip(ctx context.Context, rec GossipRecord, ttl time.Duration) (*GossipRegistration, error) {
	if err := s.writable("register gossip member " + rec.Name); err != nil {
		return nil, err
	}
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	if ttl < 2*time.Second {
		return nil, fmt.Errorf("gossip registration TTL %v: at least 2s: %w", ttl, ErrInvalid)
	}
	if err := rec.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	lease, err := s.putGossip(ctx, &rec, ttl)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g := &GossipRegistration{s: s, rec: rec, ttl: ttl, cancel: cancel, done: make(chan struct{}), lease: lease}
	go g.run(rctx)
	return g, nil
}

// putGossip grants a lease and writes rec under it.
func (s *Store) putGossip(ctx context.Context, rec *GossipRecord, ttl time.Duration) (clientv3.LeaseID, error) {
	lease, err := s.cli.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return 0, s.wrap("grant gossip lease", err)
	}
	op, err := putOp(s.keys.gossip(rec.Name), rec, clientv3.WithLease(lease.ID))
	if err == nil {
		_, err = s.kv.Txn(ctx).Then(op).Commit()
		err = s.wrap("register gossip member "+rec.Name, err)
	}
	if err != nil {
		_, _ = s.cli.Revoke(context.WithoutCancel(ctx), lease.ID)
		return 0, err
	}
	return lease.ID, nil
}

// run renews the lease; when it is lost, it registers again.
func (g *GossipRegistration) run(ctx context.Context) {
	defer close(g.done)
	for ctx.Err() == nil {
		g.mu.Lock()
		lease := g.lease
		g.mu.Unlock()
		if ka, err := g.s.cli.KeepAlive(ctx, lease); err == nil {
			for range ka { // until the lease is lost or ctx ends
			}
		}
		for ctx.Err() == nil {
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			if lease, err := g.s.putGossip(ctx, &g.rec, g.ttl); err == nil {
				g.mu.Lock()
				g.lease = lease
				g.mu.Unlock()
				break
			}
		}
	}
}

// Close stops renewing and revokes the lease, which deletes the record at
// once. It is safe to call more than once.
func (g *GossipRegistration) Close(ctx context.Context) error {
	var err error
	g.once.Do(func() {
		g.cancel()
		<-g.done
		g.mu.Lock()
		lease := g.lease
		g.mu.Unlock()
		_, err = g.s.cli.Revoke(ctx, lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			err = nil
		}
		err = g.s.wrap("unregister gossip member "+g.rec.Name, err)
	})
	return err
}

// GossipSeeds lists the registered gossip members, in name order.
func (s *Store) GossipSeeds(ctx context.Context) ([]*GossipRecord, error) {
	recs, _, err := list(ctx, s, s.keys.gossips(), func() *GossipRecord { return &GossipRecord{} })
	return recs, err
}
