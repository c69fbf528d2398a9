package meta

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SegmentEvent is a change of one segment's placement. Record is nil when
// the segment was freed. Err is set (and the channel then closed) when the
// watch failed, e.g. because fromRev was compacted: re-read and watch again.
type SegmentEvent struct {
	Segment int64
	Record  *SegmentRecord
	Rev     int64
	Err     error
}

// NamespaceEvent is a change of a namespace record (state, paths, ANA
// states). Record is nil when the namespace was removed.
type NamespaceEvent struct {
	ID     string
	Record *NamespaceRecord
	Rev    int64
	Err    error
}

// VolumeEvent is a change of a volume's record (a resize, a state
// change). Record is nil when the volume was deleted. Err is set (and the
// channel then closed) when the watch failed: read the record again and
// watch from the revision of that read.
type VolumeEvent struct {
	Record *VolumeRecord
	Rev    int64
	Err    error
}

// WatchVolume delivers every change of volume name's record after
// revision fromRev (use the revision VolumeRev returns; 0 means from now),
// in order, until ctx ends; then the channel is closed.
func (s *Store) WatchVolume(ctx context.Context, name string, fromRev int64) <-chan VolumeEvent {
	out := make(chan VolumeEvent, 4)
	watchKeys(ctx, s, s.keys.volume(name), false, fromRev, out, func(ev *clientv3.Event) VolumeEvent {
		e := VolumeEvent{Rev: ev.Kv.ModRevision}
		e.Record, e.Err = eventRecord[VolumeRecord](ev)
		return e
	}, func(err error) VolumeEvent { return VolumeEvent{Err: err} })
	return out
}

// WatchSegments delivers every change of the volume's segments after
// revision fromRev (use the revision returned by Segments; 0 means from
// now), in order, until ctx ends; then the channel is closed.
func (m *VolumeMap) WatchSegments(ctx context.Context, fromRev int64) <-chan SegmentEvent {
	prefix := m.s.keys.segments(m.name)
	out := make(chan SegmentEvent, 16)
	watchKeys(ctx, m.s, prefix, true, fromRev, out, func(ev *clientv3.Event) SegmentEvent {
		e := SegmentEvent{Rev: ev.Kv.ModRevision}
		if e.Segment, e.Err = segmentIndex(string(ev.Kv.Key), prefix); e.Err != nil {
			return e
		}
		e.Record, e.Err = eventRecord[SegmentRecord](ev)
		return e
	}, func(err error) SegmentEvent { return SegmentEvent{Err: err} })
	return out
}

// WatchNamespaces delivers every change of namespace records after fromRev
// (0: from now) until ctx ends; then the channel is closed.
func (s *Store) WatchNamespaces(ctx context.Context, fromRev int64) <-chan NamespaceEvent {
	prefix := s.keys.namespaces()
	out := make(chan NamespaceEvent, 16)
	watchKeys(ctx, s, prefix, true, fromRev, out, func(ev *clientv3.Event) NamespaceEvent {
		e := NamespaceEvent{ID: string(ev.Kv.Key[len(prefix):]), Rev: ev.Kv.ModRevision}
		e.Record, e.Err = eventRecord[NamespaceRecord](ev)
		return e
	}, func(err error) NamespaceEvent { return NamespaceEvent{Err: err} })
	return out
}

// watchKeys runs one etcd watch of key (every key under it when prefix)
// and converts its events onto out, closing out when ctx ends or after
// delivering a failure.
func watchKeys[E any](ctx context.Context, s *Store, key string, prefix bool, fromRev int64, out chan<- E,
	conv func(*clientv3.Event) E, fail func(error) E) {
	var opts []clientv3.OpOption
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	if fromRev > 0 {
		opts = append(opts, clientv3.WithRev(fromRev+1))
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	wch := s.cli.Watch(wctx, key, opts...)
	go func() {
		defer close(out)
		defer cancel()
		for wr := range wch {
			if wr.Err() != nil {
				send(ctx, out, fail(s.watchErr(watchOp(key, fromRev), wr)))
				return
			}
			for _, ev := range wr.Events {
				if !send(ctx, out, conv(ev)) {
					return
				}
			}
		}
	}()
}

// eventRecord decodes the record a put event writes; a delete's is nil.
func eventRecord[R any, P interface {
	*R
	record
}](ev *clientv3.Event) (*R, error) {
	if ev.Type != clientv3.EventTypePut {
		return nil, nil
	}
	r := new(R)
	return r, decodeKV(ev.Kv, P(r))
}

// watchOp names a watch of key after revision fromRev in errors.
func watchOp(key string, fromRev int64) string {
	if fromRev > 0 {
		return fmt.Sprintf("watch %s after revision %d", key, fromRev)
	}
	return "watch " + key
}

func send[E any](ctx context.Context, out chan<- E, e E) bool {
	select {
	case out <- e:
		return true
	case <-ctx.Done():
		return false
	}
}
