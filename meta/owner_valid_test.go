package meta

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// heldRenewals renews leases for real but, while a pause is set, holds
// each answer back after etcd gave it (as a process stopped right after
// sending a renewal would hear it only when it resumes) until the test
// lets it through.
type heldRenewals struct {
	s        *Store
	mu       sync.Mutex
	hold     chan struct{} // nil: answers pass at once
	sent     time.Time     // when the held renewal was sent (no later than the owner thinks)
	heldOnce chan struct{} // closed when a renewal is held
}

func (h *heldRenewals) renew(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	sent := time.Now()
	resp, err := h.s.cli.KeepAliveOnce(ctx, id)
	h.mu.Lock()
	hold, held := h.hold, h.heldOnce
	if hold != nil && held != nil {
		h.sent, h.heldOnce = sent, nil
		close(held)
	}
	h.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return resp, err
}

// pause holds the next renewal's answer until the returned release is
// called, and returns a channel closed once one is held.
func (h *heldRenewals) pause() (held <-chan struct{}, release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hold, ch := make(chan struct{}), make(chan struct{})
	h.hold, h.heldOnce = hold, ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			h.hold = nil
			h.mu.Unlock()
			close(hold)
		})
	}
}

func (h *heldRenewals) heldSent() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sent
}

// TestOwnerValidCountsFromSentRenewal: an owner's lease is certainly held
// until the TTL less the margin after the last answered renewal was sent,
// not after its answer arrived (etcd renewed the lease somewhere between
// the two). An answer held back for a while moves the deadline only to its
// sending plus the TTL less the margin; an answer held back past the
// deadline (a process stopped with its renewal in flight) revives nothing:
// Valid fails from the deadline on, the context ends with ErrLeaseLost,
// and the late answer does not bring the ownership back.
func TestOwnerValidCountsFromSentRenewal(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	h := &heldRenewals{s: s}
	s.renewLease = h.renew
	ctx := testCtx(t)
	const ttl = 5 * time.Second
	o, err := s.Acquire(ctx, "vol", OwnerOptions{Holder: "reader", ReadOnly: true, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release(ctx)
	if err := o.Valid(); err != nil {
		t.Fatalf("a fresh owner: %v", err)
	}

	// An answer held back for a second (less than the deadline).
	held, release := h.pause()
	<-held
	sent := h.heldSent()
	before := o.until.Load()
	waitUntil(t, "a second passed with the answer held", func() bool { return time.Since(sent) > time.Second })
	release()
	waitUntil(t, "the held answer applied", func() bool { return o.until.Load() != before })
	if limit := int64(sent.Add(ttl - renewMargin(ttl)).Sub(o.base)); o.until.Load() > limit {
		t.Fatalf("a renewal sent at %v and answered %v later counts until %v after the owner started, past %v (its sending + TTL - margin)",
			sent.Sub(o.base), time.Since(sent), time.Duration(o.until.Load()), time.Duration(limit))
	}
	if err := o.Valid(); err != nil {
		t.Fatalf("after a renewal answered late but in time: %v", err)
	}

	// An answer held back past the deadline.
	held, release = h.pause()
	defer release()
	<-held
	waitUntil(t, "Valid failing with the renewal's answer held", func() bool { return o.Valid() != nil })
	if err := o.Valid(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Valid past the deadline: %v, want ErrLeaseLost", err)
	}
	waitDone(t, o.Context(), "past the deadline")
	release()
	// The answer etcd gave (the lease was still alive when it renewed it)
	// is heard now; the owner stays ended.
	if err := o.Valid(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Valid after the late answer: %v, want ErrLeaseLost", err)
	}
	if cause := context.Cause(o.Context()); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", cause)
	}
}

// waitUntil polls cond until it holds, failing t after a minute (a hang
// guard, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
