package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Readers that follow moves.
//
// A read-only owner (a reader) keeps the segment map it reads from in
// memory and follows it with a watch. When a move commits (CommitMove,
// etcd revision C), the moved shard's old slot stays reserved in the
// segment's committed move record until every reader has stopped reading
// it. A reader publishes, in its owner record under its own lease, the
// revision up to which it has applied the segment map (Owner.SetApplied:
// Applied). FinishMove releases the old slot only when every reader of the
// volume either has Applied >= C, or took its lease after C (its owner
// key's create revision is above C, so it listed the map after the commit);
// a reader whose lease expired has no key and holds nothing up: it stopped
// reading on its own clock at least renewMargin before etcd expired the
// lease (Owner.Valid: every read it completes after that fails), so the
// release needs no wait of its own. The
// condition is monotonic (Applied only grows, new readers satisfy it, gone
// ones too), so it is checked by a read before the release transaction
// without comparing the readers' keys.
//
// The deferred release is durable because it is the committed move record
// itself: a mover that stops while readers lag (crash, lost lease,
// cancelled) leaves the move committed, and whoever settles it later
// (ResumeMoves of the next owner, the controller) calls FinishMove, which
// again waits for the readers. Nothing is freed early and nothing leaks.

// ReadersBehindError says which readers keep a committed move's old slot
// reserved. It is of class ErrReadersBehind.
type ReadersBehindError struct {
	Volume  string
	Segment int64
	// Commit is the revision of the commit the readers must apply; Rev the
	// revision the readers' records were read at.
	Commit, Rev int64
	Readers     []string
}

func (e *ReadersBehindError) Error() string {
	return fmt.Sprintf("volume %s segment %d: the move committed at revision %d is not yet applied by reader(s) %s",
		e.Volume, e.Segment, e.Commit, strings.Join(e.Readers, ", "))
}

func (e *ReadersBehindError) Is(target error) bool { return target == ErrReadersBehind }

// SetApplied publishes, in a read-only owner's record, that it has applied
// the volume's segment map up to revision rev (it no longer reads a slot a
// move committed at or before rev moved away from). It fails with
// ErrLeaseLost when the ownership is gone and ErrInvalid for a read-write
// owner. Revisions lower than one published before are ignored.
func (o *Owner) SetApplied(ctx context.Context, rev int64) error {
	if o.rec.Mode != ModeRO {
		return fmt.Errorf("volume %s: only readers publish an applied revision: %w", o.volume, ErrInvalid)
	}
	o.recMu.Lock()
	defer o.recMu.Unlock()
	if rev <= o.rec.Applied {
		return nil
	}
	rec := o.rec
	rec.Applied = rev
	op, err := putOp(o.key, &rec, clientv3.WithLease(o.lease))
	if err != nil {
		return err
	}
	resp, err := o.s.kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(o.key), "=", o.epoch)).Then(op).Commit()
	if err != nil {
		return o.s.wrap("publish applied revision of "+o.volume, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("volume %s epoch %d: %w", o.volume, o.epoch, ErrLeaseLost)
	}
	o.rec = rec
	return nil
}

// readersBehind returns the readers of the volume that may still read a
// slot moved away from at revision commit, and the revision it read at.
func (m *VolumeMap) readersBehind(ctx context.Context, commit int64) ([]string, int64, error) {
	resp, err := m.s.kv.Get(ctx, m.s.keys.ownersRO(m.name), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, m.s.wrap("list readers of "+m.name, err)
	}
	var behind []string
	for _, kv := range resp.Kvs {
		r := &OwnerRecord{}
		if err := decodeKV(kv, r); err != nil {
			return nil, 0, err
		}
		if kv.CreateRevision < commit && r.Applied < commit {
			behind = append(behind, fmt.Sprintf("%s (applied %d)", r.Holder, r.Applied))
		}
	}
	return behind, resp.Header.Revision, nil
}

// FinishMoveFollowed is FinishMove that waits, as long as ctx allows, for
// the readers it finds behind (ErrReadersBehind): it watches their records
// and tries again whenever one changes or goes away.
func (m *VolumeMap) FinishMoveFollowed(ctx context.Context, seg int64) error {
	for {
		err := m.FinishMove(ctx, seg)
		var behind *ReadersBehindError
		if !errors.As(err, &behind) {
			return err
		}
		if err := m.waitReaders(ctx, behind.Rev); err != nil {
			return fmt.Errorf("%w: %w", behind, err)
		}
	}
}

// waitReaders returns at the first change of the volume's read-only owner
// records after revision rev, or when ctx ends.
func (m *VolumeMap) waitReaders(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := m.s.cli.Watch(wctx, m.s.keys.ownersRO(m.name), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for wr := range wch {
		if wr.Err() != nil {
			return m.s.watchErr("watch readers of "+m.name, wr)
		}
		if len(wr.Events) > 0 {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("watch readers of %s: closed: %w", m.name, ErrUnreachable)
}

// Readers maps the holders of the volume's read-only leases to the
// revision each has applied the segment map up to.
func (s *Store) Readers(ctx context.Context, volume string) (map[string]int64, error) {
	resp, err := s.kv.Get(ctx, s.keys.ownersRO(volume), clientv3.WithPrefix())
	if err != nil {
		return nil, s.wrap("list readers of "+volume, err)
	}
	out := make(map[string]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r := &OwnerRecord{}
		if err := decodeKV(kv, r); err != nil {
			return nil, err
		}
		out[r.Holder] = r.Applied
	}
	return out, nil
}
