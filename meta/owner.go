package meta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
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
	// the owner stops renewing it (crash, partition). Default
	// DefaultOwnerTTL; at least MinOwnerTTL.
	TTL time.Duration
	// OnRenewal hears the outcome of every renewal of the lease: how long
	// etcd took to answer it, or why it failed (metrics; the scale
	// harness's renewal percentiles). It runs on the renewal's goroutine
	// and must not block. Default nil.
	OnRenewal func(took time.Duration, err error)
}

// The owner lease's TTL when OwnerOptions.TTL is 0, and the shortest one
// Acquire takes.
const (
	DefaultOwnerTTL = 10 * time.Second
	MinOwnerTTL     = 2 * time.Second
)

// Owner is a held ownership of a volume. Its Context is cancelled, with
// cause ErrLeaseLost, the moment the lease expires, is revoked, or the
// owner key is deleted; from then on fenced writes fail with ErrLeaseLost.
//
// It is also cancelled, on the owner's own clock, when the lease is no
// longer certainly held: the TTL less a safety margin (see renewMargin)
// after the last renewal that etcd answered was *sent* (etcd renewed it
// after that moment, so the lease cannot expire before it plus the TTL).
// The etcd client only notices an expired lease up to a second late, and a
// new owner may be granted the volume (or a slot a reader read from may be
// given to another volume) the moment etcd expires the old lease, so the
// old owner must stop first. Valid says whether that deadline has passed,
// on every call: a process paused past it stops at once when it wakes,
// before its timers run.
//
// The owner key is watched; a watch that breaks (etcd compacted the
// history while the owner was cut off) does not end the ownership if a
// read of the key finds it still the owner's within the TTL less the
// margin (see run).
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
	ended  atomic.Bool // set once ctx is cancelled (Valid reads it)
	done   chan struct{}
	once   sync.Once
	wch    clientv3.WatchChan
	// base is the owner's start on the monotonic clock; until is how long
	// after base the lease is certainly held (see Valid).
	base   time.Time
	until  atomic.Int64
	lastRW OwnerInfo
	// onRenewal is OwnerOptions.OnRenewal.
	onRenewal func(took time.Duration, err error)
	// rewatches counts the watches of the key made again after a break
	// found the key still the owner's (run; read by tests).
	rewatches atomic.Int64
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
		o.TTL = DefaultOwnerTTL
	}
	if o.TTL < MinOwnerTTL {
		return nil, fmt.Errorf("owner TTL %v: at least %v: %w", o.TTL, MinOwnerTTL, ErrInvalid)
	}
	host, _ := os.Hostname()
	rec := OwnerRecord{Holder: o.Holder, Mode: ModeRW, Mover: o.Mover, Host: host, PID: os.Getpid(), Since: time.Now().UTC().Truncate(time.Second)}
	key := s.keys.ownerRW(volume)
	if o.ReadOnly {
		rec.Mode, key = ModeRO, s.keys.ownerRO(volume, o.Holder)
	}
	if err := rec.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	granted, lease, epoch, prev, err := s.grantAndClaim(ctx, volume, key, &rec, o.TTL)
	if err != nil {
		return nil, err
	}
	ow, err := s.startOwner(ctx, volume, key, rec, lease, epoch)
	if err != nil {
		return nil, err
	}
	ow.ttl, ow.lastRW, ow.onRenewal = o.TTL, prev, o.OnRenewal
	ow.extend(granted.Add(o.TTL - renewMargin(o.TTL)))
	go ow.run()
	return ow, nil
}

// grantTries bounds the leases Acquire is granted for one claim.
const grantTries = 3

// grantAndClaim grants a lease of ttl and claims the volume under it,
// returning when the lease was asked for (it cannot expire before that
// plus ttl), the lease, the epoch and the last read-write owner. A lease
// that expired before the claim reached etcd (a process or an etcd too
// loaded to send or serve the claim within the TTL) is not an answer
// about the volume: a fresh lease is granted, up to grantTries in all.
func (s *Store) grantAndClaim(ctx context.Context, volume, key string, rec *OwnerRecord, ttl time.Duration) (time.Time, clientv3.LeaseID, int64, OwnerInfo, error) {
	grant := s.grantLease
	if grant == nil {
		grant = s.cli.Grant
	}
	for try := 1; ; try++ {
		granted := time.Now()
		lease, err := grant(ctx, int64((ttl+time.Second-1)/time.Second))
		if err != nil {
			return time.Time{}, 0, 0, OwnerInfo{}, s.wrap("grant lease", err)
		}
		epoch, prev, err := s.claim(ctx, volume, key, rec, lease.ID)
		if err == nil {
			return granted, lease.ID, epoch, prev, nil
		}
		_, _ = s.cli.Revoke(context.WithoutCancel(ctx), lease.ID)
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) || try == grantTries {
			return time.Time{}, 0, 0, OwnerInfo{}, err
		}
	}
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
			var busy *BusyError
			if errors.As(err, &busy) {
				err = s.leasesLeft(ctx, busy)
			}
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
		busy := &BusyError{Volume: volume, Mode: rec.Mode, Owners: []OwnerInfo{ownerInfo(resp.Kvs[0], other)}}
		return absent, s.leasesLeft(ctx, busy)
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision), nil
}

// conflict names the owner that kept a claim of rec from succeeding, from
// the volume's owner keys read when it failed; nil means a race to retry
// (nothing conflicting is left, or only a mover beside a reader).
func conflict(volume, key string, rec *OwnerRecord, kvs []*mvccpb.KeyValue) error {
	busy := &BusyError{Volume: volume, Mode: rec.Mode, Mover: rec.Mover}
	for _, kv := range kvs {
		other := &OwnerRecord{}
		if err := decodeKV(kv, other); err != nil {
			return err
		}
		shared := string(kv.Key) != key && (rec.Mode == ModeRO && (other.Mode == ModeRO || other.Mover) ||
			rec.Mover && other.Mode == ModeRO)
		if !shared {
			busy.Owners = append(busy.Owners, ownerInfo(kv, other))
		}
	}
	if len(busy.Owners) == 0 {
		return nil
	}
	return busy
}

// startOwner begins watching the key; run renews the lease.
func (s *Store) startOwner(ctx context.Context, volume, key string, rec OwnerRecord, lease clientv3.LeaseID, epoch int64) (*Owner, error) {
	octx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	o := &Owner{s: s, volume: volume, key: key, lease: lease, epoch: epoch, rec: rec, ctx: octx, cancel: cancel,
		done: make(chan struct{}), base: time.Now()}
	o.wch = o.watch(epoch)
	return o, nil
}

// Valid returns nil while the ownership is certainly held, and from the
// moment it may not the context's cause (wrapping ErrLeaseLost, or
// context.Canceled after Release): the TTL less the margin has passed
// since the last answered renewal was sent, or the ownership ended. It reads the monotonic clock,
// so it holds for a process that was stopped and has not yet run its
// timers. A read of the volume's storage that completes after Valid fails
// must not be used (blockdev.NewLeaseFence): a slot it read from may have
// been freed and given to another volume. Valid is cheap (a clock read and
// two atomic loads); once it fails it fails for good.
func (o *Owner) Valid() error {
	if !o.ended.Load() && int64(time.Since(o.base)) < o.until.Load() {
		return nil
	}
	if !o.ended.Load() {
		o.lost(deadlinePassed)
	}
	if cause := context.Cause(o.ctx); cause != nil {
		return cause
	}
	return fmt.Errorf("volume %s epoch %d: ownership ended: %w", o.volume, o.epoch, ErrLeaseLost)
}

// end cancels the owner's context with cause; Valid fails from then on.
// ended is set first, so that Valid fails once the context is done.
func (o *Owner) end(cause error) {
	o.ended.Store(true)
	o.cancel(cause)
}

// extend moves the deadline until which the lease is certainly held to t,
// unless it is already later.
func (o *Owner) extend(t time.Time) {
	until := int64(t.Sub(o.base))
	for {
		cur := o.until.Load()
		if cur >= until || o.until.CompareAndSwap(cur, until) {
			return
		}
	}
}

// renewal is the outcome of one renewal of the lease: when it was sent and
// the TTL etcd renewed it for, or why it failed.
type renewal struct {
	sent time.Time
	ttl  time.Duration
	err  error
}

// renew sends a renewal of the lease every quarter of the time a renewal
// keeps the lease certainly held (the TTL less the margin), each a single
// keep-alive request of its own, so that each answer is known to answer a
// request sent at a known moment, and hands every outcome to run until ctx
// ends. Renewals do not wait for each other: a slow answer does not delay
// the next request, and any answer that comes within the TTL less the
// margin of its sending keeps the lease certainly held. Each is given up
// when its answer could no longer help.
func (o *Owner) renew(ctx context.Context, out chan<- renewal) {
	once := o.s.renewLease
	if once == nil {
		once = o.s.cli.KeepAliveOnce
	}
	useful := o.ttl - renewMargin(o.ttl)
	tick := time.NewTicker(useful / 4)
	defer tick.Stop()
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	for {
		inFlight.Go(func() {
			r := renewal{sent: time.Now()}
			rctx, cancel := context.WithTimeout(ctx, useful)
			defer cancel()
			resp, err := once(rctx, o.lease)
			if r.err = err; err == nil {
				r.ttl = time.Duration(resp.TTL) * time.Second
			}
			if o.onRenewal != nil {
				o.onRenewal(time.Since(r.sent), err)
			}
			select {
			case out <- r:
			case <-ctx.Done():
			}
		})
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// renewMargin is how long before the lease could expire in etcd the owner
// gives up on its own: a second (round trips, the client's once-a-second
// check) or a fifth of the TTL, whichever is longer.
func renewMargin(ttl time.Duration) time.Duration { return max(time.Second, ttl/5) }

// run renews the lease and cancels the owner's context when etcd says the
// lease is gone, the key is deleted or replaced, or no renewal was
// answered in time (TTL less renewMargin since the grant or the sending of
// the last answered renewal).
//
// A watch of the key that breaks (its history compacted while etcd was out
// of reach, a member without a leader) does not end the ownership by
// itself: the key is read again (checkKey) and, if it is still the
// owner's, watched anew from that read. Meanwhile the renewal deadline
// holds as always, and the read must succeed within the TTL less the
// margin from the break, or the owner stops.
func (o *Owner) run() {
	defer close(o.done)
	renewals := make(chan renewal)
	var renewer sync.WaitGroup
	renewer.Go(func() { o.renew(o.ctx, renewals) })
	defer renewer.Wait() // the context is cancelled on every return
	expiry := time.NewTimer(o.left())
	defer expiry.Stop()
	var rc *recheck // the read of the key after the watch broke, or nil
	defer func() { rc.stop() }()
	for {
		select {
		case <-o.ctx.Done():
			return
		case <-expiry.C:
			o.lost(deadlinePassed)
			return
		case r := <-renewals:
			if why := o.renewed(r); why != "" {
				o.lost(why)
				return
			}
			expiry.Reset(o.left())
		case wr, ok := <-o.wch:
			if !ok || wr.Err() != nil {
				o.wch, rc = nil, o.startRecheck(o.watchBroke(wr, ok))
				continue
			}
			if why := o.changed(wr.Events); why != "" {
				o.lost(why)
				return
			}
		case c := <-rc.result():
			if c.gone != "" {
				o.lost(fmt.Sprintf("%v, and the key read again: %s", rc.broke, c.gone))
				return
			}
			rc.stop()
			rc, o.wch = nil, o.watch(c.rev)
			o.rewatches.Add(1)
		case <-rc.deadline():
			o.lost(rc.failed())
			return
		}
	}
}

// deadlinePassed is why an owner ends when its lease is no longer
// certainly held.
const deadlinePassed = "no lease renewal answered within the TTL less the safety margin of its sending"

// left is how long the lease is still certainly held.
func (o *Owner) left() time.Duration {
	return time.Duration(o.until.Load()) - time.Since(o.base)
}

// renewed applies the outcome of a renewal: an answer extends the deadline
// to its sending plus the TTL less the margin. It returns why the
// ownership ends ("" when it goes on): etcd no longer has the lease, or
// the deadline passed before the answer came (the process was paused, say:
// the lease may have expired in etcd meanwhile, whatever the answer says).
func (o *Owner) renewed(r renewal) string {
	switch {
	case errors.Is(r.err, rpctypes.ErrLeaseNotFound):
		return "lease expired or revoked"
	case o.left() <= 0:
		return deadlinePassed
	case r.err == nil:
		o.extend(r.sent.Add(r.ttl - renewMargin(o.ttl)))
	}
	return ""
}

// lost ends the ownership with a cause wrapping ErrLeaseLost.
func (o *Owner) lost(why string) {
	o.end(fmt.Errorf("volume %s epoch %d: %s: %w", o.volume, o.epoch, why, ErrLeaseLost))
}

// watch watches the owner key after revision rev until the ownership ends.
func (o *Owner) watch(rev int64) clientv3.WatchChan {
	return o.s.cli.Watch(clientv3.WithRequireLeader(o.ctx), o.key, clientv3.WithRev(rev+1))
}

// changed says why events of the owner key end the ownership ("" when
// they do not): the key was deleted, or replaced by another owner's.
func (o *Owner) changed(events []*clientv3.Event) string {
	for _, ev := range events {
		if ev.Type == clientv3.EventTypeDelete || ev.Kv.CreateRevision != o.epoch {
			return "owner key deleted"
		}
	}
	return ""
}

// watchBroke describes why the watch of the owner key ended.
func (o *Owner) watchBroke(wr clientv3.WatchResponse, ok bool) error {
	if !ok {
		return fmt.Errorf("the watch on the owner key closed")
	}
	return o.s.watchErr("watch the owner key", wr)
}

// recheck reads the owner key again after its watch broke, in the
// background, retrying while etcd does not answer.
type recheck struct {
	broke  error                 // why the watch broke
	last   atomic.Pointer[error] // the last read's error, nil before one failed
	out    chan keyCheck
	cancel context.CancelFunc
	limit  *time.Timer
}

// failed describes the recheck that did not succeed in time.
func (rc *recheck) failed() string {
	last := "no read answered"
	if err := rc.last.Load(); err != nil {
		last = (*err).Error()
	}
	return fmt.Sprintf("%v, and the key could not be read again within the TTL less the safety margin (%s)", rc.broke, last)
}

// keyCheck is the outcome of a recheck: the revision of a read that found
// the key still the owner's, or why it is not.
type keyCheck struct {
	rev  int64
	gone string
}

// recheckRetry is the wait between two reads of the key while etcd does
// not answer; each read is bounded by recheckReadLimit.
const (
	recheckRetry     = 200 * time.Millisecond
	recheckReadLimit = 2 * time.Second
)

// startRecheck starts reading the key again; its deadline is the TTL less
// the margin from now.
func (o *Owner) startRecheck(broke error) *recheck {
	ctx, cancel := context.WithCancel(o.ctx)
	rc := &recheck{broke: broke, out: make(chan keyCheck, 1), cancel: cancel,
		limit: time.NewTimer(o.ttl - renewMargin(o.ttl))}
	go func() {
		for {
			rev, gone, err := o.checkKey(ctx)
			if err == nil {
				rc.out <- keyCheck{rev: rev, gone: gone}
				return
			}
			rc.last.Store(&err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(recheckRetry):
			}
		}
	}()
	return rc
}

func (rc *recheck) result() <-chan keyCheck {
	if rc == nil {
		return nil
	}
	return rc.out
}

func (rc *recheck) deadline() <-chan time.Time {
	if rc == nil {
		return nil
	}
	return rc.limit.C
}

func (rc *recheck) stop() {
	if rc != nil {
		rc.cancel()
		rc.limit.Stop()
	}
}

// checkKey reads the owner key (a linearizable read) and returns the
// revision of the read, and "" if the key is still this owner's: present,
// created at the owner's epoch (a key deleted and created again, by
// anyone, has a later create revision) and under the owner's lease;
// otherwise why it is not.
func (o *Owner) checkKey(ctx context.Context) (rev int64, gone string, err error) {
	rctx, cancel := context.WithTimeout(ctx, recheckReadLimit)
	defer cancel()
	resp, err := o.s.kv.Get(rctx, o.key)
	if err != nil {
		return 0, "", o.s.wrap("read the owner key", err)
	}
	switch {
	case len(resp.Kvs) == 0:
		gone = "owner key deleted"
	case resp.Kvs[0].CreateRevision != o.epoch:
		gone = fmt.Sprintf("owner key created again at revision %d", resp.Kvs[0].CreateRevision)
	case clientv3.LeaseID(resp.Kvs[0].Lease) != o.lease:
		gone = fmt.Sprintf("owner key under lease %x, not %x", resp.Kvs[0].Lease, o.lease)
	}
	return resp.Header.Revision, gone, nil
}

// Lose ends the ownership at once, as a lost lease does: Context is
// cancelled with a cause wrapping cause and ErrLeaseLost. It is for an owner
// that learns from elsewhere that it is stale (the storage refused it: a
// newer owner fenced it). Release still revokes the lease.
func (o *Owner) Lose(cause error) {
	o.end(fmt.Errorf("volume %s epoch %d: %w: %w", o.volume, o.epoch, cause, ErrLeaseLost))
}

// Release gives ownership up: it stops renewing and revokes the lease,
// which deletes the owner key at once. It is safe to call more than once.
func (o *Owner) Release(ctx context.Context) error {
	var err error
	o.once.Do(func() {
		o.end(context.Canceled)
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
	// Host, PID and Since say where and when the owner took the volume
	// (its host name, process ID and clock); unset for owners recorded
	// before they were kept.
	Host  string    `json:"host,omitempty"`
	PID   int       `json:"pid,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// LeaseLeft (BusyError only) is how long etcd still keeps the owner's
	// lease if it is not renewed, as etcd said when the claim was refused:
	// 0 when the lease has expired and the key is about to go, -1 unknown.
	LeaseLeft time.Duration `json:"-"`
	// LeaseTTL (BusyError only) is the lease's time to live; 0 unknown.
	LeaseTTL time.Duration `json:"-"`
	lease    clientv3.LeaseID
}

// ownerInfo describes the owner whose key is kv and record r.
func ownerInfo(kv *mvccpb.KeyValue, r *OwnerRecord) OwnerInfo {
	return OwnerInfo{Holder: r.Holder, Mode: r.Mode, Epoch: kv.CreateRevision, Mover: r.Mover, Host: r.Host, PID: r.PID,
		Since: r.Since, LeaseLeft: -1, lease: clientv3.LeaseID(kv.Lease)}
}

// Owners lists a volume's current owners.
func (s *Store) Owners(ctx context.Context, volume string) ([]OwnerInfo, error) {
	owners, _, err := listKeys(ctx, s, s.keys.owners(volume), "owners of "+volume, ownerKV)
	return owners, err
}

// ownerKV decodes the owner key kv.
func ownerKV(kv *mvccpb.KeyValue) (OwnerInfo, error) {
	r := &OwnerRecord{}
	if err := decodeKV(kv, r); err != nil {
		return OwnerInfo{}, err
	}
	return ownerInfo(kv, r), nil
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
