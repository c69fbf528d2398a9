package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// OwnersSince lists, from etcd's history, the owners that acquired volume
// after revision rev, oldest first, movers aside: what an owner fenced at epoch rev (its
// lease ran out while etcd could not be reached) checks before taking the
// volume again. It fails with ErrCompacted when that history is gone, so
// nobody can tell.
func (s *Store) OwnersSince(ctx context.Context, volume string, rev int64) ([]OwnerInfo, error) {
	prefix := s.keys.owners(volume)
	now, err := s.kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, s.wrap("list owners of "+volume, err)
	}
	upTo := now.Header.Revision
	if rev >= upTo {
		return nil, nil
	}
	// The watch gets a gRPC stream of its own (its metadata differs): etcd
	// sends progress only when every watcher of a stream is synced, and an
	// owner's watch of its own key starts after the current revision.
	wctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "nvstripe-watch", "owner-history"))
	defer cancel()
	wch := s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	// A progress notification at upTo or later says every event up to it
	// was delivered; ask for one now and then until it comes.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var out []OwnerInfo
	for {
		select {
		case <-ctx.Done():
			return nil, s.wrap("owner history of "+volume, ctx.Err())
		case <-tick.C:
			_ = s.cli.RequestProgress(wctx)
			continue
		case wr, ok := <-wch:
			if !ok {
				err := ctx.Err()
				if err == nil {
					err = errors.New("watch ended")
				}
				return nil, s.wrap("owner history of "+volume, err)
			}
			if err := wr.Err(); err != nil {
				if errors.Is(err, rpctypes.ErrCompacted) {
					return nil, fmt.Errorf("owner history of %s since revision %d: %w: %w", volume, rev, ErrCompacted, err)
				}
				return nil, s.wrap("owner history of "+volume, err)
			}
			for _, ev := range wr.Events {
				if ev.Kv.ModRevision > upTo {
					return out, nil
				}
				if ev.Type != clientv3.EventTypePut || !ev.IsCreate() {
					continue
				}
				r := &OwnerRecord{}
				if err := decodeKV(ev.Kv, r); err != nil {
					return nil, err
				}
				if r.Mover {
					continue // the controller moving shards changes no data
				}
				out = append(out, OwnerInfo{Holder: r.Holder, Mode: r.Mode, Epoch: ev.Kv.CreateRevision})
			}
			if wr.IsProgressNotify() && wr.Header.Revision >= upTo {
				return out, nil
			}
		}
	}
}
