package memetcd

import (
	"context"
	"sort"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxWatchBatch bounds the events of one watch response (a revision's
// events are never split).
const maxWatchBatch = 1000

// watcher is one client's watch API.
type watcher struct {
	s      *Server
	ctx    context.Context // ends when the client closes
	cancel context.CancelFunc

	mu      sync.Mutex
	watches map[*watch]struct{}
	wg      sync.WaitGroup
}

var _ clientv3.Watcher = (*watcher)(nil)

func newWatcher(s *Server) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &watcher{s: s, ctx: ctx, cancel: cancel, watches: map[*watch]struct{}{}}
}

// watch is one Watch call's state.
type watch struct {
	key, end []byte
	op       clientv3.Op
	next     int64         // the first revision not delivered yet
	progress chan struct{} // RequestProgress asked for a notification
	out      chan clientv3.WatchResponse
}

// Watch delivers the events of key (a range with clientv3.WithPrefix or
// WithRange) from the revision of clientv3.WithRev (default: the next
// one) until ctx ends or the client closes; then the channel closes.
func (w *watcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	op := clientv3.OpGet(key, opts...)
	wa := &watch{key: []byte(key), end: op.RangeBytes(), op: op, next: op.Rev(),
		progress: make(chan struct{}, 1), out: make(chan clientv3.WatchResponse)}
	// The watch starts now, as etcd's Watch returns once the server has
	// created it: a write after Watch returns is in it.
	w.s.mu.Lock()
	cur := w.s.rev
	w.s.mu.Unlock()
	if wa.next <= 0 {
		wa.next = cur + 1
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx.Err() != nil {
		close(wa.out)
		return wa.out
	}
	w.watches[wa] = struct{}{}
	w.wg.Go(func() {
		defer func() {
			w.mu.Lock()
			delete(w.watches, wa)
			w.mu.Unlock()
			close(wa.out)
		}()
		w.run(ctx, wa, cur)
	})
	return wa.out
}

// run delivers wa's events until it ends; cur was the revision when it
// was created.
func (w *watcher) run(ctx context.Context, wa *watch, cur int64) {
	s := w.s
	if wa.op.IsCreatedNotify() && !w.send(ctx, wa, clientv3.WatchResponse{Header: s.headerAt(cur), Created: true}) {
		return
	}
	wantProgress := false
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		if wa.next < s.compacted {
			resp := clientv3.WatchResponse{Header: s.header(), CompactRevision: s.compacted, Canceled: true}
			s.mu.Unlock()
			w.send(ctx, wa, resp)
			return
		}
		evs, next := s.eventsLocked(wa)
		cur, changed := s.rev, s.changed
		s.mu.Unlock()
		wa.next = next
		if len(evs) > 0 && !w.send(ctx, wa, clientv3.WatchResponse{Header: s.headerAt(cur), Events: evs}) {
			return
		}
		if next <= cur {
			continue // more than one batch
		}
		if wantProgress {
			wantProgress = false
			if !w.send(ctx, wa, clientv3.WatchResponse{Header: s.headerAt(cur)}) {
				return
			}
		}
		select {
		case <-changed:
		case <-wa.progress:
			wantProgress = true
		case <-ctx.Done():
			return
		case <-w.ctx.Done():
			return
		}
	}
}

// eventsLocked returns wa's events from wa.next on (up to a batch) and
// the revision after the last one it looked at.
// REQUIRES: mu held.
func (s *Server) eventsLocked(wa *watch) ([]*clientv3.Event, int64) {
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].rev >= wa.next })
	var evs []*clientv3.Event
	next := s.rev + 1
	for ; i < len(s.log); i++ {
		e := s.log[i]
		if len(evs) >= maxWatchBatch && e.rev != s.log[i-1].rev {
			next = e.rev
			break
		}
		if !inRange(e.key, wa.key, wa.end) || (e.del && wa.op.IsFilterDelete()) || (!e.del && wa.op.IsFilterPut()) {
			continue
		}
		evs = append(evs, e.pb(wa.op.IsPrevKV()))
	}
	return evs, next
}

func (e event) pb(prevKV bool) *clientv3.Event {
	ev := &clientv3.Event{Type: mvccpb.Event_PUT, Kv: e.cur.pb(e.key, false)}
	if e.del {
		ev.Type = mvccpb.Event_DELETE
		ev.Kv = &mvccpb.KeyValue{Key: []byte(e.key), ModRevision: e.rev}
	}
	if prevKV && e.prev.ver != 0 {
		ev.PrevKv = e.prev.pb(e.key, false)
	}
	return ev
}

// headerAt is a response header at rev; it reads nothing of the server's
// state (the caller need not hold mu).
func (s *Server) headerAt(rev int64) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: 0x6d656d, MemberId: 0x6d656d, Revision: rev, RaftTerm: 1}
}

// send hands resp to the watch's reader unless the watch ends first.
func (w *watcher) send(ctx context.Context, wa *watch, resp clientv3.WatchResponse) bool {
	select {
	case wa.out <- resp:
		return true
	case <-ctx.Done():
	case <-w.ctx.Done():
	}
	return false
}

// RequestProgress asks every watch of the client for a progress
// notification: a response without events whose header revision says
// every event up to it was delivered.
func (w *watcher) RequestProgress(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for wa := range w.watches {
		select {
		case wa.progress <- struct{}{}:
		default:
		}
	}
	return nil
}

// Close ends every watch of the client.
func (w *watcher) Close() error {
	w.mu.Lock()
	w.cancel() // under mu: a Watch either sees it or has started its goroutine
	w.mu.Unlock()
	w.wg.Wait()
	return nil
}
