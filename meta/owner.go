package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// OwnerOptions configure Acquire.
type OwnerOptions struct {
	// Holder names the owner (host or agent name), shown to others.
	// Required.
	Holder string
	// ReadOnly asks for a shared read-only lease instead of the exclusive
	// read-write one. Default false (read-write).
	ReadOnly bool
	// Mover asks for the read-write lease of an owner that only moves
	// shards and repairs slots (the controller's mover): it does not change
	// the volume's data, so read-only owners may hold their leases beside
	// it, before and after it is taken. Readers follow the moves
	// (Owner.SetApplied, VolumeMap.FinishMove). Default false.
	Mover bool
	// TTL is the lease time to live: how long the volume stays owned after
	// the owner stops renewing it (crash, partition). Default 10s; at
	// least 2s.
	TTL time.Duration
}

// Owner is a held ownership of a volume. Its Context is cancelled, with
// cause ErrLeaseLost, the moment the lease expires, is revoked, or the
// owner key is deleted; from then on fenced writes fail with ErrLeaseLost.
//
// It is also cancelled, on the owner's own clock, when no renewal has been
// answered for the lease's TTL less a safety margin (see renewMargin): the
// etcd client only notices an expired lease up to a second late, and a new
// owner may be granted the volume the moment etcd expires the old lease, so
// the old owner must stop first.
type Owner struct {
	s      *Store
	volume string
	key    string
	lease  clientv3.LeaseID
	epoch  int64
	ttl    time.Duration
	recMu  sync.Mutex // serialises SetApplied
	rec    OwnerRecord
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	once   sync.Once
	ka     <-chan *clientv3.LeaseKeepAliveResponse
	wch    clientv3.WatchChan
	lastRW OwnerInfo
}

// Epoch is the owner's epoch: the etcd revision that created its key. A new
// owner of the same volume always has a higher epoch than every earlier one.
func (o *Owner) Epoch() int64 { return o.epoch }

// LastRW is the read-write owner that acquired the volume last before this
// one, as etcd had it recorded when this one acquired (Epoch is its epoch;
// the zero OwnerInfo when none is recorded). An owner that lost its lease
// and acquires again learns from it whether another took the volume
// read-write in between, however much history etcd compacted since.
func (o *Owner) LastRW() OwnerInfo { return o.lastRW }

// Context is cancelled when ownership is lost or released; context.Cause
// then wraps ErrLeaseLost (or is context.Canceled after Release).
func (o *Owner) Context() context.Context { return o.ctx }

// Volume returns the owned volume's name.
func (o *Owner) Volume() string { return o.volume }

// Acquire takes ownership of a volume: the exclusive read-write lease, or a
// shared read-only one. It fails with ErrBusy when the volume is owned in a
// conflicting mode, and ErrNotFound for a missing or deleting volume. The
// lease is renewed in the background until Release or until ctx ends.
func (s *Store) Acquire(ctx context.Context, volume string, o OwnerOptions) (*Owner, error) {
	if err := s.writable("acquire " + volume); err != nil {
		return nil, err
	}
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.TTL < 2*time.Second {
		return nil, fmt.Errorf("owner TTL %v: at least 2s: %w", o.TTL, ErrInvalid)
	}
	rec := OwnerRecord{Holder: o.Holder, Mode: ModeRW, Mover: o.Mover}
	key := s.keys.ownerRW(volume)
	if o.ReadOnly {
		rec.Mode, key = ModeRO, s.keys.ownerRO(volume, o.Holder)
	}
	if err := rec.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	granted := time.Now() // the lease cannot expire before granted + TTL
	lease, err := s.cli.Grant(ctx, int64((o.TTL+time.Second-1)/time.Second))
	if err != nil {
		return nil, s.wrap("grant lease", err)
	}
	epoch, prev, err := s.claim(ctx, volume, key, &rec, lease.ID)
	if err != nil {
		_, _ = s.cli.Revoke(context.WithoutCancel(ctx), lease.ID)
		return nil, err
	}
	ow, err := s.startOwner(ctx, volume, key, rec, lease.ID, epoch)
	if err != nil {
		return nil, err
	}
	ow.ttl, ow.lastRW = o.TTL, prev
	go ow.run(granted)
	return ow, nil
}

// claim writes the owner key under the lease if the volume is ready and no
// conflicting owner exists; it returns the key's create revision and the
// last read-write owner before it (zero when none is recorded). A
// read-write owner conflicts with every other owner, except that a mover
// and readers share the volume.
func (s *Store) claim(ctx context.Context, volume, key string, rec *OwnerRecord, lease clientv3.LeaseID) (int64, OwnerInfo, error) {
	for range maxRetries {
		v, rev, err := s.volume(ctx, volume)
		if err != nil {
			return 0, OwnerInfo{}, err
		}
		if v.State != VolumeReady {
			return 0, OwnerInfo{}, fmt.Errorf("volume %s is being deleted: %w", volume, ErrNotFound)
		}
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(s.keys.volume(volume)), "=", rev),
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		}
		rw, err := s.rwCompare(ctx, volume, rec)
		if err != nil {
			return 0, OwnerInfo{}, err
		}
		cmps = append(cmps, rw)
		if rec.Mode == ModeRW && !rec.Mover {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.keys.ownersRO(volume)), "=", 0).WithPrefix())
		}
		ops, err := claimOps(s.keys, volume, key, rec, lease)
		if err != nil {
			return 0, OwnerInfo{}, err
		}
		resp, err := s.kv.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(s.keys.owners(volume), clientv3.WithPrefix())).Commit()
		if err != nil {
			return 0, OwnerInfo{}, s.wrap("acquire "+volume, err)
		}
		if resp.Succeeded {
			prev, err := lastRW(resp.Responses[0].GetResponseRange().Kvs)
			return resp.Header.Revision, prev, err
		}
		if err := conflict(volume, key, rec, resp.Responses[0].GetResponseRange().Kvs); err != nil {
			return 0, OwnerInfo{}, err
		}
	}
	return 0, OwnerInfo{}, fmt.Errorf("acquire %s: %w", volume, ErrConflict)
}

// claimOps are the operations of a successful claim: read the last
// read-write owner (before it is replaced), write the owner key under the
// lease and, for a read-write owner, record it as the last one.
func claimOps(k keys, volume, key string, rec *OwnerRecord, lease clientv3.LeaseID) ([]clientv3.Op, error) {
	op, err := putOp(key, rec, clientv3.WithLease(lease))
	if err != nil {
		return nil, err
	}
	ops := []clientv3.Op{clientv3.OpGet(k.lastRW(volume)), op}
	if rec.Mode == ModeRW && !rec.Mover { // a mover changes no data: not recorded
		last, err := putOp(k.lastRW(volume), rec)
		if err != nil {
			return nil, err
		}
		ops = append(ops, last)
	}
	return ops, nil
}

// lastRW decodes the last read-write owner a claim read (its epoch is the
// record's mod revision: it is written in that owner's claim).
func lastRW(kvs []*mvccpb.KeyValue) (OwnerInfo, error) {
	if len(kvs) == 0 {
		return OwnerInfo{}, nil
	}
	r := &OwnerRecord{}
	if err := decodeKV(kvs[0], r); err != nil {
		return OwnerInfo{}, err
	}
	return OwnerInfo{Holder: r.Holder, Mode: r.Mode, Epoch: kvs[0].ModRevision}, nil
}

// BusyError is Acquire's ErrBusy: the owners of the volume that were in
// the way, as etcd had them when it refused the claim.
type BusyError struct {
	Volume string
	Owners []OwnerInfo // at least one
}

func (e *BusyError) Error() string {
	o := e.Owners[0]
	return fmt.Sprintf("volume %s is mapped %s by %s (epoch %d): %v", e.Volume, o.Mode, o.Holder, o.Epoch, ErrBusy)
}

func (e *BusyError) Unwrap() error { return ErrBusy }

// Has says whether the owner of epoch was among those in the way.
func (e *BusyError) Has(epoch int64) bool {
	for _, o := range e.Owners {
		if o.Epoch == epoch {
			return true
		}
	}
	return false
}

// rwCompare is the claim's condition on the read-write owner key: absent,
// or for a reader, unchanged since it was read as a mover's.
func (s *Store) rwCompare(ctx context.Context, volume string, rec *OwnerRecord) (clientv3.Cmp, error) {
	key := s.keys.ownerRW(volume)
	absent := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if rec.Mode != ModeRO {
		return absent, nil
	}
	resp, err := s.kv.Get(ctx, key)
	if err != nil {
		return absent, s.wrap("acquire "+volume, err)
	}
	if len(resp.Kvs) == 0 {
		return absent, nil
	}
	other := &OwnerRecord{}
	if err := decodeKV(resp.Kvs[0], other); err != nil {
		return absent, err
	}
	if !other.Mover {
		return absent, &BusyError{Volume: volume, Owners: []OwnerInfo{{Holder: other.Holder, Mode: other.Mode, Epoch: resp.Kvs[0].CreateRevision}}}
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision), nil
}

// conflict names the owner that kept a claim of rec from succeeding, from
// the volume's owner keys read when it failed; nil means a race to retry
// (nothing conflicting is left, or only a mover beside a reader).
func conflict(volume, key string, rec *OwnerRecord, kvs []*mvccpb.KeyValue) error {
	busy := &BusyError{Volume: volume}
	for _, kv := range kvs {
		other := &OwnerRecord{}
		if err := decodeKV(kv, other); err != nil {
			return err
		}
		shared := string(kv.Key) != key && (rec.Mode == ModeRO && (other.Mode == ModeRO || other.Mover) ||
			rec.Mover && other.Mode == ModeRO)
		if !shared {
			busy.Owners = append(busy.Owners, OwnerInfo{Holder: other.Holder, Mode: other.Mode, Epoch: kv.CreateRevision})
		}
	}
	if len(busy.Owners) == 0 {
		return nil
	}
	return busy
}

// startOwner begins renewing the lease and watching the key.
func (s *Store) startOwner(ctx context.Context, volume, key string, rec OwnerRecord, lease clientv3.LeaseID, epoch int64) (*Owner, error) {
	octx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	o := &Owner{s: s, volume: volume, key: key, lease: lease, epoch: epoch, rec: rec, ctx: octx, cancel: cancel, done: make(chan struct{})}
	ka, err := s.cli.KeepAlive(octx, lease)
	if err != nil {
		cancel(err)
		_, _ = s.cli.Revoke(context.WithoutCancel(ctx), lease)
		return nil, s.wrap("keep lease alive", err)
	}
	o.ka, o.wch = ka, s.cli.Watch(clientv3.WithRequireLeader(octx), key, clientv3.WithRev(epoch+1))
	return o, nil
}

// renewMargin is how long before the lease could expire in etcd the owner
// gives up on its own: a second (round trips, the client's once-a-second
// check) or a fifth of the TTL, whichever is longer.
func renewMargin(ttl time.Duration) time.Duration { return max(time.Second, ttl/5) }

// run cancels the owner's context when the keep-alive stream ends, the key
// is deleted or replaced, or no renewal was answered in time (TTL less
// renewMargin since the grant or the last answer).
func (o *Owner) run(granted time.Time) {
	defer close(o.done)
	lost := func(why string) {
		o.cancel(fmt.Errorf("volume %s epoch %d: %s: %w", o.volume, o.epoch, why, ErrLeaseLost))
	}
	expiry := time.NewTimer(time.Until(granted.Add(o.ttl - renewMargin(o.ttl))))
	defer expiry.Stop()
	for {
		select {
		case <-o.ctx.Done():
			return
		case <-expiry.C:
			lost("no lease renewal answered within the TTL less the safety margin")
			return
		case resp, ok := <-o.ka:
			if !ok {
				lost("lease expired or revoked")
				return
			}
			// The answer left etcd after it renewed the lease for resp.TTL.
			expiry.Reset(time.Duration(resp.TTL)*time.Second - renewMargin(o.ttl))
		case wr, ok := <-o.wch:
			if !ok || wr.Err() != nil {
				lost("lost the watch on the owner key")
				return
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete || ev.Kv.CreateRevision != o.epoch {
					lost("owner key deleted")
					return
				}
			}
		}
	}
}

// Lose ends the ownership at once, as a lost lease does: Context is
// cancelled with a cause wrapping cause and ErrLeaseLost. It is for an owner
// that learns from elsewhere that it is stale (the storage refused it: a
// newer owner fenced it). Release still revokes the lease.
func (o *Owner) Lose(cause error) {
	o.cancel(fmt.Errorf("volume %s epoch %d: %w: %w", o.volume, o.epoch, cause, ErrLeaseLost))
}

// Release gives ownership up: it stops renewing and revokes the lease,
// which deletes the owner key at once. It is safe to call more than once.
func (o *Owner) Release(ctx context.Context) error {
	var err error
	o.once.Do(func() {
		o.cancel(context.Canceled)
		<-o.done
		_, err = o.s.cli.Revoke(ctx, o.lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			err = nil // a lease that is already gone is released
		}
		err = o.s.wrap("release "+o.volume, err)
	})
	return err
}

// OwnerInfo describes one current owner of a volume.
type OwnerInfo struct {
	Holder string `json:"holder"`
	Mode   string `json:"mode"`
	Epoch  int64  `json:"epoch"`
	// Mover: a read-write owner that only moves shards (the controller,
	// OwnerOptions.Mover); it runs no task addressed to the volume's owner.
	Mover bool `json:"mover,omitempty"`
}

// Owners lists a volume's current owners.
func (s *Store) Owners(ctx context.Context, volume string) ([]OwnerInfo, error) {
	resp, err := s.kv.Get(ctx, s.keys.owners(volume), clientv3.WithPrefix())
	if err != nil {
		return nil, s.wrap("list owners of "+volume, err)
	}
	out := make([]OwnerInfo, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r := &OwnerRecord{}
		if err := decodeKV(kv, r); err != nil {
			return nil, err
		}
		out = append(out, OwnerInfo{Holder: r.Holder, Mode: r.Mode, Epoch: kv.CreateRevision, Mover: r.Mover})
	}
	return out, nil
}

// Mapper returns the holder that maps volume read-write: its read-write
// owner unless that is a mover; "" when there is none.
func (s *Store) Mapper(ctx context.Context, volume string) (string, error) {
	owners, err := s.Owners(ctx, volume)
	if err != nil {
		return "", err
	}
	for _, o := range owners {
		if o.Mode == ModeRW && !o.Mover {
			return o.Holder, nil
		}
	}
	return "", nil
}
