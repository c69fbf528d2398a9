// Package meta keeps nvstripe's cluster state in etcd: the cluster record,
// hosts, namespaces and their slot allocation, volumes, segments (placement),
// dirty-segment marks, volume owners, controller leadership and tasks. It is
// the only package that imports the etcd client.
//
// Schema: every key lives under one prefix per cluster, /nvstripe/<name>/
// (keys.go lists them). Values are JSON records with a "v" version field,
// decoded strictly: an unknown field, a wrong version, trailing bytes or a
// broken invariant is an ErrCorruptRecord error naming the key, never a zero
// value.
//
// Atomicity: every change that must be atomic is one etcd transaction that
// compares the mod revisions of what it read: creating a volume (under an
// overcommit judgement, with all it judged: Unchanged); allocating
// a segment (its k+m slots in the namespaces' allocation bitmaps plus the
// segment record); freeing one; beginning, committing and finishing a move.
// A transaction that loses a race is retried from fresh reads, so two
// allocators never hand out one slot and no slot is leaked (a slot is set in a
// bitmap exactly when a segment record or an in-flight move names it).
//
// Ownership: a volume has one read-write owner or any number of read-only
// ones, each an etcd key bound to a lease with a TTL; the controller's
// mover (OwnerOptions.Mover) is the one read-write owner readers share a
// volume with. The owner's context is cancelled the moment its key or lease
// disappears, and its epoch (the key's create revision) grows with every
// new owner, for fencing. Readers follow moves: they publish the segment
// map revision they applied, and a committed move's old slot is released
// only once all of them did (follow.go).
//
// Views: Store.At pins a read-only view of the store at one etcd revision
// (view.go), for reading many keys as they were together at one moment.
//
// Concurrency: a Store and the handles it returns are safe for concurrent
// use. Watches deliver events on channels from their own goroutine until
// their context ends.
package meta

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Error classes, tested with errors.Is.
var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: a record with that name already exists.
	ErrExists = errors.New("already exists")
	// ErrConflict: a transaction kept losing races with other writers.
	ErrConflict = errors.New("conflicting concurrent update")
	// ErrLeaseLost: the caller's ownership lease expired or was revoked.
	ErrLeaseLost = errors.New("ownership lease lost")
	// ErrBusy: the volume is owned (mapped) by someone else.
	ErrBusy = errors.New("in use")
	// ErrReadersBehind: a moved shard's old slot cannot be released yet:
	// a read-only owner may still read it (see *ReadersBehindError).
	ErrReadersBehind = errors.New("readers have not applied the move yet")
	// ErrUnreachable: no etcd endpoint answered.
	ErrUnreachable = errors.New("etcd unreachable")
	// ErrCorruptRecord: a stored record cannot be decoded or breaks its
	// invariants. The error names the key.
	ErrCorruptRecord = errors.New("corrupt record")
	// ErrInvalid: a malformed argument (name, size, layout, state).
	ErrInvalid = errors.New("invalid argument")
	// ErrNotInitialized: the cluster record does not exist yet.
	ErrNotInitialized = errors.New("cluster not initialized (run `nvstripe cluster init`)")
)

// Config says how to reach etcd. The zero value reaches 127.0.0.1:2379 and
// the cluster named "default".
type Config struct {
	// Endpoints are etcd client URLs or host:port pairs.
	// Default ["127.0.0.1:2379"].
	Endpoints []string
	// EndpointsFrom says where Endpoints came from ("flag --etcd", "env
	// NVSTRIPE_ETCD", "file PATH", "default"), for the error that says etcd
	// could not be reached. Default "" (not said).
	EndpointsFrom string
	// Cluster names the cluster; its keys live under /nvstripe/<Cluster>/.
	// Default "default".
	Cluster string
	// DialTimeout bounds the first contact with etcd in Open. Default 5s.
	DialTimeout time.Duration
	// TLS, when set, is used for every connection. Default nil (plain).
	TLS *tls.Config
	// Username and Password authenticate to etcd when both are set.
	Username, Password string
	// SnapshotTTL is how long Allocate trusts its cached view of hosts,
	// namespaces and allocation counts before reading them again (stale
	// entries only affect the balance of choices, never correctness: every
	// allocation compares the revisions of what it uses). Default 10s.
	SnapshotTTL time.Duration
	// Logger receives the etcd client's logs. Default: none.
	Logger *zap.Logger
}

// EnsureDefaults fills unset fields with their defaults.
func (c *Config) EnsureDefaults() {
	if len(c.Endpoints) == 0 {
		c.Endpoints = []string{"127.0.0.1:2379"}
	}
	if c.Cluster == "" {
		c.Cluster = "default"
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.SnapshotTTL <= 0 {
		c.SnapshotTTL = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// Store is a connection to one cluster's state in etcd.
type Store struct {
	cli *clientv3.Client
	// kv is cli.KV, or a pinned view's read-only wrapper of it (view.go):
	// every key-value read and write goes through it.
	kv     clientv3.KV
	rev    int64 // a view's revision; 0 for the live store
	cfg    Config
	keys   keys
	closer sync.Once
	// given: cli came from OpenClient (a client without a connection of
	// its own, whose Close reports its cancelled context).
	given bool

	// renewLease renews an owner's lease once (clientv3.Lease.KeepAliveOnce
	// when nil; a test pauses renewals with it).
	renewLease func(context.Context, clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error)
	// grantLease grants an owner's lease (clientv3.Lease.Grant when nil; a
	// test lets one expire before it is used).
	grantLease func(context.Context, int64) (*clientv3.LeaseGrantResponse, error)

	mu      sync.Mutex
	cluster *ClusterRecord // cached: immutable once created but for MaxOvercommit (SetMaxOvercommit)
	snap    *snapshot      // allocation view, see alloc.go
	// loading is closed when the snapshot load under way ends (nil: none):
	// callers that find the snapshot stale wait for it instead of each
	// loading the whole cluster (snapshot.go freshSnapshot).
	loading chan struct{}
	// snapGen counts invalidations: a load that one overtook is not kept.
	snapGen uint64
	// snapLoads counts snapshot loads (read by tests).
	snapLoads int
}

// Open connects to etcd and checks that it answers within DialTimeout. An
// unreachable etcd is a *DialError (ErrUnreachable) naming the endpoints and
// what a probe of each found: a name that does not resolve, nothing
// listening, a TLS mismatch, a service that is not etcd's client port, or
// no answer at all.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.EnsureDefaults()
	if err := checkName("cluster", cfg.Cluster); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Endpoints, DialTimeout: cfg.DialTimeout, TLS: cfg.TLS,
		Username: cfg.Username, Password: cfg.Password, Logger: cfg.Logger,
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(reconnectParams(cfg.DialTimeout))},
	})
	if err != nil {
		if rerr := refused(cfg, newKeys(cfg.Cluster).root, err); rerr != nil {
			return nil, rerr
		}
		return nil, unreachable(cfg.Endpoints, err)
	}
	s := &Store{cli: cli, kv: cli.KV, cfg: cfg, keys: newKeys(cfg.Cluster)}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(pctx, s.keys.cluster(), clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		if errors.Is(err, context.DeadlineExceeded) || isUnavailable(err) {
			return nil, diagnose(ctx, cfg, err)
		}
		if rerr := refused(cfg, s.keys.root, err); rerr != nil {
			return nil, rerr
		}
		return nil, unreachable(cfg.Endpoints, err)
	}
	return s, nil
}

// reconnectMaxDelay caps the wait between the etcd client's attempts to
// connect again after it lost etcd. gRPC's default grows to 120 s, so after
// an outage of half a minute the client found a restarted etcd about 10 s
// late (measured), and an owner that lost its lease meanwhile waited that
// long to take its volume again.
const reconnectMaxDelay = 2 * time.Second

// reconnectParams are the etcd client's connection backoff: from 250 ms,
// growing by 1.6 with 20 % jitter up to reconnectMaxDelay, each attempt
// given dialTimeout (gRPC's default 20 s would keep a connection to a paused
// etcd hanging that long before the next attempt).
func reconnectParams(dialTimeout time.Duration) grpc.ConnectParams {
	return grpc.ConnectParams{
		Backoff: backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2,
			MaxDelay: reconnectMaxDelay},
		MinConnectTimeout: dialTimeout,
	}
}

// OpenClient returns a Store over an etcd client the caller built: an
// in-memory etcd's (meta/memetcd's Server.Client) in tests, or any other
// clientv3 client. The Store owns cli: Close closes it. Of cfg, only
// Cluster, SnapshotTTL and Logger are used; nothing is dialled or probed.
func OpenClient(cli *clientv3.Client, cfg Config) (*Store, error) {
	cfg.EnsureDefaults()
	if err := checkName("cluster", cfg.Cluster); err != nil {
		return nil, err
	}
	return &Store{cli: cli, kv: cli.KV, cfg: cfg, keys: newKeys(cfg.Cluster), given: true}, nil
}

func unreachable(endpoints []string, err error) error {
	return fmt.Errorf("%w at %s: %w (is etcd running there? start one with `nvstripe etcd --dir DIR`, or pass --etcd with your cluster's endpoints)",
		ErrUnreachable, strings.Join(endpoints, ","), err)
}

// Close closes the connection. It is safe to call more than once. Closing a
// pinned view (At) does nothing: it shares its parent's connection.
func (s *Store) Close() error {
	if s.rev != 0 {
		return nil
	}
	var err error
	s.closer.Do(func() {
		err = s.cli.Close()
		if s.given && errors.Is(err, context.Canceled) {
			err = nil
		}
	})
	return err
}

// Endpoints returns the etcd endpoints in use.
func (s *Store) Endpoints() []string { return s.cfg.Endpoints }

// wrap maps an etcd client error to this package's classes: a request that
// could not reach etcd becomes ErrUnreachable naming the endpoints.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: %w", op, unreachable(s.cfg.Endpoints, err))
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	if isUnavailable(err) {
		return fmt.Errorf("%s: %w", op, unreachable(s.cfg.Endpoints, err))
	}
	if errors.Is(err, rpctypes.ErrCompacted) && s.rev != 0 {
		return fmt.Errorf("%s at revision %d: %w: %w", op, s.rev, ErrCompacted, err)
	}
	if errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("%s: %w: %w", op, ErrCompacted, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// watchErr is wrap for a watch response that ended the watch: one that
// failed because etcd compacted the revisions it was to deliver names the
// revision etcd compacted up to.
func (s *Store) watchErr(op string, wr clientv3.WatchResponse) error {
	if wr.CompactRevision != 0 {
		return fmt.Errorf("%s: etcd compacted its history up to revision %d: %w: %w", op, wr.CompactRevision, ErrCompacted, wr.Err())
	}
	return s.wrap(op, wr.Err())
}
