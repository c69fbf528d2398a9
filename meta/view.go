package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Pinned views: Store.At returns a Store whose every read is served at one
// etcd revision, so that a caller reading many keys one by one (the
// controller's snapshot) sees them all as they were together at that
// moment. The view shares the parent's connection. Its key-value access
// goes through pinnedKV, which adds clientv3.WithRev to every read and
// refuses every write and transaction, so the rest of the package needs no
// per-call care: a read helper reads at the view's revision, a write helper
// returns ErrReadOnly from its Commit before anything reaches etcd.

// ErrReadOnly: a write through a view pinned at a past revision (Store.At).
var ErrReadOnly = errors.New("read-only view pinned at a revision")

// ErrCompacted: the revision a view is pinned at has been compacted away by
// etcd; pin a fresh view (Store.At) and read again.
var ErrCompacted = errors.New("revision compacted")

// At returns a read-only view of the store pinned at etcd's current
// revision (View.Rev). Reads through the view return what was stored at
// that revision, however the store changes afterwards, until etcd compacts
// the revision (then they fail with ErrCompacted). Writes, leases and
// campaigns through it fail with ErrReadOnly and change nothing. Watches
// are not pinned. The view is valid until the parent store is closed;
// closing the view does nothing. It never shares Allocate's cached view of
// the cluster with its parent.
func (s *Store) At(ctx context.Context) (*Store, error) {
	resp, err := s.cli.Get(ctx, s.keys.cluster(), clientv3.WithCountOnly())
	if err != nil {
		return nil, s.wrap("read current revision", err)
	}
	return s.AtRev(resp.Header.Revision)
}

// AtRev is At for a given revision (a Snapshot's, to read it again). A
// revision etcd has not reached yet fails at the first read.
func (s *Store) AtRev(rev int64) (*Store, error) {
	if rev <= 0 {
		return nil, fmt.Errorf("pin store at revision %d: %w", rev, ErrInvalid)
	}
	return &Store{cli: s.cli, kv: pinnedKV{kv: s.cli.KV, rev: rev}, rev: rev, cfg: s.cfg, keys: s.keys}, nil
}

// Rev returns the revision a view is pinned at, 0 for the live store.
func (s *Store) Rev() int64 { return s.rev }

// writable fails with ErrReadOnly on a pinned view, for the operations that
// do not go through the key-value API (leases, elections).
func (s *Store) writable(op string) error {
	if s.rev == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", op, readOnly(s.rev))
}

func readOnly(rev int64) error {
	return fmt.Errorf("store view pinned at revision %d: %w", rev, ErrReadOnly)
}

// pinnedKV is the key-value API of a pinned view: reads at rev, no writes.
type pinnedKV struct {
	kv  clientv3.KV
	rev int64
}

var _ clientv3.KV = pinnedKV{}

// readOpts is the one place a view's reads get their revision (it is
// appended last, so it wins over any WithRev of the caller).
func (p pinnedKV) readOpts(opts []clientv3.OpOption) []clientv3.OpOption {
	return append(slices.Clip(opts), clientv3.WithRev(p.rev))
}

func (p pinnedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return p.kv.Get(ctx, key, p.readOpts(opts)...)
}

func (p pinnedKV) GetStream(ctx context.Context, key string, opts ...clientv3.OpOption) (clientv3.GetStreamChan, error) {
	return p.kv.GetStream(ctx, key, p.readOpts(opts)...)
}

func (p pinnedKV) Put(context.Context, string, string, ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	return nil, readOnly(p.rev)
}

func (p pinnedKV) Delete(context.Context, string, ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	return nil, readOnly(p.rev)
}

func (p pinnedKV) Compact(context.Context, int64, ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	return nil, readOnly(p.rev)
}

// Do fails for reads too: an Op's revision cannot be changed once built.
func (p pinnedKV) Do(context.Context, clientv3.Op) (clientv3.OpResponse, error) {
	return clientv3.OpResponse{}, readOnly(p.rev)
}

// Txn returns a transaction whose Commit fails: etcd runs transactions at
// the current revision, and a view does not write.
func (p pinnedKV) Txn(context.Context) clientv3.Txn { return readOnlyTxn{rev: p.rev} }

type readOnlyTxn struct{ rev int64 }

func (t readOnlyTxn) If(...clientv3.Cmp) clientv3.Txn        { return t }
func (t readOnlyTxn) Then(...clientv3.Op) clientv3.Txn       { return t }
func (t readOnlyTxn) Else(...clientv3.Op) clientv3.Txn       { return t }
func (t readOnlyTxn) Commit() (*clientv3.TxnResponse, error) { return nil, readOnly(t.rev) }
