// Package memetcd is an etcd held in memory, for tests: the key-value,
// lease and watch APIs of an etcd client (clientv3.KV, clientv3.Lease,
// clientv3.Watcher) served from one process's memory, with the semantics
// meta relies on:
//
//  1. Revisions: every transaction that writes makes one new revision; each
//     key keeps its create and mod revisions and a version, and reads at a
//     past revision see the keys as they were then.
//  2. Transactions: compares on version, create and mod revision, value and
//     lease (of a key or a range), then one branch of puts, deletes, ranges
//     and nested transactions, all at one revision. A put of the same key
//     twice in one branch, more than MaxTxnOps operations or a put bound to a
//     lease that does not exist is refused as etcd refuses it, changing
//     nothing.
//  3. Leases: granted with a TTL in seconds, renewed by keep-alives, revoked
//     or expired by the server's clock, deleting every key bound to them in
//     one revision. The clock may be a Clock the test moves by hand.
//  4. Watches: every event of a key or a range after a start revision, in
//     revision order; a start revision that compaction removed ends the
//     watch with a response whose CompactRevision is set (Err() is
//     rpctypes.ErrCompacted), and RequestProgress sends a progress
//     notification once a watch has delivered everything up to the current
//     revision.
//  5. Compaction: Compact(rev) forgets every version older than rev; a read
//     or a watch before it fails with ErrCompacted.
//
// What etcd has and this has not: authentication, cluster membership,
// maintenance (status, defragment, snapshots), range streams, watch
// fragmentation and periodic progress notifications, and anything about
// time beyond lease expiry. A client's Maintenance, Cluster and Auth are nil.
//
// Conformance: meta/metatest's suite runs against this and against an
// embedded etcd, so both answer alike for what it covers.
//
// Concurrency: a Server and its clients are safe for concurrent use; one
// mutex guards the state, and each watch delivers from a goroutine of its
// own until its context ends, its client closes or the server closes.
package memetcd

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// MaxTxnOps is the most operations one transaction branch may hold, as
// etcd's default --max-txn-ops.
const MaxTxnOps = 128

// ErrClosed: the server or the client was closed.
var ErrClosed = errors.New("memetcd: closed")

// Options configure a Server. The zero value uses the real clock.
type Options struct {
	// Clock, when set, is the time leases expire by: they expire when a test
	// moves it with Advance, never on their own. Default nil: the real
	// clock, and a timer per lease.
	Clock *Clock
}

// Server is the in-memory etcd. Its clients (Client) share its state.
type Server struct {
	clock *Clock // nil: real time

	mu        sync.Mutex
	closed    bool
	rev       int64 // current revision (1 when empty, as etcd)
	compacted int64 // revision compacted up to; 0 when never
	kv        keyspace
	log       []event       // every event after compacted, in revision order
	changed   chan struct{} // closed (and replaced) when rev grows or the server closes
	leases    map[int64]*lease
	nextLease int64
}

// New returns an empty server at revision 1.
func New(o Options) *Server {
	s := &Server{clock: o.Clock, rev: 1, changed: make(chan struct{}),
		leases: map[int64]*lease{}, nextLease: 0x7a0000}
	s.kv.hist = map[string][]version{}
	if s.clock != nil {
		s.clock.subscribe(s.expire)
	}
	return s
}

// Client returns a new etcd client of the server with its own lease and
// watch handles: closing it ends its watches and keep-alives, not the
// server's state (leases live until revoked or expired, as in etcd).
func (s *Server) Client() *clientv3.Client {
	c := clientv3.NewCtxClient(context.Background(), clientv3.WithZapLogger(zap.NewNop()))
	c.KV = clientv3.NewKVFromKVClient(kvClient{s}, c)
	c.Lease = newLeaseClient(s)
	c.Watcher = newWatcher(s)
	return c
}

// Rev returns the current revision.
func (s *Server) Rev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Close ends every watch of every client. Later requests fail with
// ErrClosed.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for _, l := range s.leases {
		l.stopTimer()
	}
	close(s.changed)
}

// now is the server's time.
func (s *Server) now() time.Time {
	if s.clock != nil {
		return s.clock.Now()
	}
	return time.Now()
}

// bumpLocked makes rev the current revision and wakes the watches.
// REQUIRES: mu held.
func (s *Server) bumpLocked(rev int64) {
	s.rev = rev
	close(s.changed)
	s.changed = make(chan struct{})
}

// Clock is a hand-moved clock for lease expiry: time stands still until
// Advance moves it, and then every lease whose deadline passed expires
// before Advance returns.
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	subs []func()
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d and expires the leases that ran out.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	subs := append([]func(){}, c.subs...)
	c.mu.Unlock()
	for _, f := range subs {
		f()
	}
}

func (c *Clock) subscribe(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs = append(c.subs, f)
}

// Clock returns the clock leases expire by, nil for the real clock.
func (s *Server) Clock() *Clock { return s.clock }
