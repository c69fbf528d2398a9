package memetcd

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MaxLeaseTTL is the longest TTL a lease may be granted, as etcd's.
const MaxLeaseTTL = 9000000000

// lease is a granted lease: it expires at deadline unless renewed.
type lease struct {
	id, ttl  int64
	deadline time.Time
	keys     map[string]struct{}
	timer    *time.Timer // real clock only
}

func (l *lease) stopTimer() {
	if l.timer != nil {
		l.timer.Stop()
	}
}

func (s *Server) attachLocked(id int64, key string) {
	if l := s.leases[id]; l != nil {
		l.keys[key] = struct{}{}
	}
}

func (s *Server) detachLocked(id int64, key string) {
	if l := s.leases[id]; l != nil {
		delete(l.keys, key)
	}
}

// renewLocked sets l's deadline a TTL from now.
// REQUIRES: mu held.
func (s *Server) renewLocked(l *lease) {
	ttl := time.Duration(l.ttl) * time.Second
	l.deadline = s.now().Add(ttl)
	if s.clock != nil {
		return
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(ttl, s.expire)
	} else {
		l.timer.Reset(ttl)
	}
}

// expire revokes every lease whose deadline passed.
func (s *Server) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	now := s.now()
	for _, id := range slices.Sorted(maps.Keys(s.leases)) {
		if l := s.leases[id]; !now.Before(l.deadline) {
			s.revokeLocked(l)
		}
	}
}

// revokeLocked ends l and deletes its keys, in one revision.
// REQUIRES: mu held.
func (s *Server) revokeLocked(l *lease) {
	l.stopTimer()
	t := &txn{s: s, rev: s.rev + 1}
	for _, key := range slices.Sorted(maps.Keys(l.keys)) {
		t.deleteRange(&pb.DeleteRangeRequest{Key: []byte(key)})
	}
	delete(s.leases, l.id)
	t.commit()
}

// header is a response header at the current revision.
// REQUIRES: mu held.
func (s *Server) header() *pb.ResponseHeader { return s.headerAt(s.rev) }

// lookup runs f on the live lease id under the lock, or fails with
// ErrLeaseNotFound.
func (s *Server) lookup(ctx context.Context, id clientv3.LeaseID, f func(*lease)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.expire()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	l := s.leases[int64(id)]
	if l == nil {
		return rpctypes.ErrLeaseNotFound
	}
	f(l)
	return nil
}

// leaseClient is one client's lease API.
type leaseClient struct {
	s      *Server
	ctx    context.Context // ends when the client closes: its keep-alives stop
	cancel context.CancelFunc
	mu     sync.Mutex // orders KeepAlive's start against Close
	wg     sync.WaitGroup
}

var _ clientv3.Lease = (*leaseClient)(nil)

func newLeaseClient(s *Server) *leaseClient {
	ctx, cancel := context.WithCancel(context.Background())
	return &leaseClient{s: s, ctx: ctx, cancel: cancel}
}

func (c *leaseClient) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ttl > MaxLeaseTTL {
		return nil, rpctypes.ErrLeaseTTLTooLarge
	}
	ttl = max(ttl, 1)
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	s.nextLease++
	l := &lease{id: s.nextLease, ttl: ttl, keys: map[string]struct{}{}}
	s.leases[l.id] = l
	s.renewLocked(l)
	return &clientv3.LeaseGrantResponse{ResponseHeader: s.header(), ID: clientv3.LeaseID(l.id), TTL: ttl}, nil
}

func (c *leaseClient) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	var h *pb.ResponseHeader
	err := c.s.lookup(ctx, id, func(l *lease) {
		c.s.revokeLocked(l)
		h = c.s.header()
	})
	if err != nil {
		return nil, err
	}
	return &clientv3.LeaseRevokeResponse{Header: h}, nil
}

// TimeToLive answers TTL -1 for a lease that does not exist, as etcd. It
// always lists the attached keys (clientv3.WithAttachedKeys cannot be read
// from outside the client package).
func (c *leaseClient) TimeToLive(ctx context.Context, id clientv3.LeaseID, _ ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error) {
	resp := &clientv3.LeaseTimeToLiveResponse{ID: id, TTL: -1}
	err := c.s.lookup(ctx, id, func(l *lease) {
		resp.TTL = int64(l.deadline.Sub(c.s.now()) / time.Second)
		resp.GrantedTTL = l.ttl
		for _, key := range slices.Sorted(maps.Keys(l.keys)) {
			resp.Keys = append(resp.Keys, []byte(key))
		}
	})
	if err == rpctypes.ErrLeaseNotFound {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	resp.ResponseHeader = c.s.header()
	c.s.mu.Unlock()
	return resp, nil
}

func (c *leaseClient) Leases(ctx context.Context) (*clientv3.LeaseLeasesResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.s.expire()
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	resp := &clientv3.LeaseLeasesResponse{ResponseHeader: c.s.header()}
	for _, id := range slices.Sorted(maps.Keys(c.s.leases)) {
		resp.Leases = append(resp.Leases, clientv3.LeaseStatus{ID: clientv3.LeaseID(id)})
	}
	return resp, nil
}

func (c *leaseClient) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	resp := &clientv3.LeaseKeepAliveResponse{ID: id}
	err := c.s.lookup(ctx, id, func(l *lease) {
		c.s.renewLocked(l)
		resp.TTL = l.ttl
		resp.ResponseHeader = c.s.header()
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// KeepAlive renews the lease now and every third of its TTL (real time)
// until ctx ends, the client closes or the lease is gone; then the channel
// closes. Responses the caller does not take in time are dropped.
func (c *leaseClient) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ctx.Err(); err != nil {
		return nil, ErrClosed
	}
	out := make(chan *clientv3.LeaseKeepAliveResponse, 16)
	c.wg.Go(func() {
		defer close(out)
		for {
			resp, err := c.KeepAliveOnce(ctx, id)
			if err != nil {
				return
			}
			select {
			case out <- resp:
			default:
			}
			t := time.NewTimer(max(time.Duration(resp.TTL)*time.Second/3, 100*time.Millisecond))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			case <-c.ctx.Done():
				t.Stop()
				return
			}
		}
	})
	return out, nil
}

// Close stops the client's keep-alives; its leases live on until they
// expire or are revoked.
func (c *leaseClient) Close() error {
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}
