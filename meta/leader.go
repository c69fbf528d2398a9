package meta

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Leadership is held controller leadership. Its Context is cancelled, with
// cause ErrLeaseLost, when the leadership session's lease is lost.
type Leadership struct {
	session  *concurrency.Session
	election *concurrency.Election
	ctx      context.Context
	cancel   context.CancelCauseFunc
}

// Campaign blocks until holder is the controller leader of the cluster (or
// ctx ends). ttl is the leadership lease TTL (default 10s).
func (s *Store) Campaign(ctx context.Context, holder string, ttl time.Duration) (*Leadership, error) {
	if err := checkName("holder", holder); err != nil {
		return nil, err
	}
	if err := s.writable("campaign"); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(int((ttl+time.Second-1)/time.Second)), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, s.wrap("leader session", err)
	}
	el := concurrency.NewElection(sess, s.keys.leader())
	if err := el.Campaign(ctx, holder); err != nil {
		_ = sess.Close()
		return nil, s.wrap("campaign", err)
	}
	lctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		select {
		case <-sess.Done():
			cancel(fmt.Errorf("controller leadership of %s: %w", holder, ErrLeaseLost))
		case <-lctx.Done():
		}
	}()
	return &Leadership{session: sess, election: el, ctx: lctx, cancel: cancel}, nil
}

// Context is cancelled when leadership is lost or resigned.
func (l *Leadership) Context() context.Context { return l.ctx }

// Resign gives leadership up and ends the session.
func (l *Leadership) Resign(ctx context.Context) error {
	l.cancel(context.Canceled)
	err := l.election.Resign(ctx)
	if cerr := l.session.Close(); err == nil {
		err = cerr
	}
	return err
}

// Leader returns the current leader's holder name (ErrNotFound if none).
func (s *Store) Leader(ctx context.Context) (string, error) {
	resp, err := s.kv.Get(ctx, s.keys.leader(), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", s.wrap("read leader", err)
	}
	if len(resp.Kvs) == 0 {
		return "", classErrorf(ErrNotFound, "no controller leader")
	}
	return string(resp.Kvs[0].Value), nil
}
