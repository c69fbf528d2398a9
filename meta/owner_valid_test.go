package meta

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// heldRenewals renews leases for real but, while paused, holds back every
// answer after etcd gave it (as a process stopped right after sending its
// renewals would hear them only when it resumes) until the test lets it
// through.
type heldRenewals struct {
	s     *Store
	mu    sync.Mutex
	hold  chan struct{} // nil: answers pass at once
	sents []time.Time   // when the answers held on hold were sent
}

func (h *heldRenewals) renew(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	sent := time.Now() // no later than the owner's own record of it
	resp, err := h.s.cli.KeepAliveOnce(ctx, id)
	h.mu.Lock()
	hold := h.hold
	if hold != nil {
		h.sents = append(h.sents, sent)
	}
	h.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return resp, err
}

// pause holds back every answer from now on.
func (h *heldRenewals) pause() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold, h.sents = make(chan struct{}), nil
}

// held returns when the answers held were sent.
func (h *heldRenewals) held() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.sents...)
}

// letHeld lets the answers held so far through and holds later ones; it
// returns the latest sending among those let through.
func (h *heldRenewals) letHeld() time.Time {
	h.mu.Lock()
	old, sents := h.hold, h.sents
	h.hold, h.sents = make(chan struct{}), nil
	h.mu.Unlock()
	close(old)
	var last time.Time
	for _, s := range sents {
		if s.After(last) {
			last = s
		}
	}
	return last
}

// resume lets every answer through from now on.
func (h *heldRenewals) resume() {
	h.mu.Lock()
	old := h.hold
	h.hold = nil
	h.mu.Unlock()
	if old != nil {
		close(old)
	}
}

// TestOwnerValidCountsFromSentRenewal: an owner's lease is certainly held
// until the TTL less the margin after the last answered renewal was sent,
// not after its answer arrived (etcd renewed the lease somewhere between
// the two). Answers held back for a while move the deadline only to their
// sending plus the TTL less the margin; answers held back past the
// deadline (a process stopped with its renewals in flight) revive
// nothing: Valid fails from the deadline on, the context ends with
// ErrLeaseLost, and the late answers do not bring the ownership back.
func TestOwnerValidCountsFromSentRenewal(t *testing.T) {
	s := setup(t, 3, 1, 4)
	addVolume(t, s, "vol", 2, 1, 2)
	h := &heldRenewals{s: s}
	s.renewLease = h.renew
	ctx := testCtx(t)
	const ttl = 5 * time.Second
	o := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "reader", ReadOnly: true, TTL: ttl})
	defer o.Release(ctx)
	defer h.resume()
	if err := o.Valid(); err != nil {
		t.Fatalf("a fresh owner: %v", err)
	}

	// Answers held back for a second (less than the deadline).
	h.pause()
	testutil.WaitFor(t, "an answer held for a second", func() bool {
		held := h.held()
		return len(held) > 0 && time.Since(held[0]) > time.Second
	})
	before := o.until.Load()
	last := h.letHeld()
	testutil.WaitFor(t, "the held answers applied", func() bool { return o.until.Load() != before })
	if limit := int64(last.Add(ttl - renewMargin(ttl)).Sub(o.base)); o.until.Load() > limit {
		t.Fatalf("renewals sent until %v, answered late, count until %v after the owner started, past %v (their sending + TTL - margin)",
			last.Sub(o.base), time.Duration(o.until.Load()), time.Duration(limit))
	}
	if err := o.Valid(); err != nil {
		t.Fatalf("after renewals answered late but in time: %v", err)
	}

	// Answers held back past the deadline.
	testutil.WaitFor(t, "Valid failing with every answer held", func() bool { return o.Valid() != nil })
	if err := o.Valid(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Valid past the deadline: %v, want ErrLeaseLost", err)
	}
	waitDone(t, o.Context(), "past the deadline")
	h.resume()
	// The answers etcd gave (the lease was still alive when it renewed it)
	// are heard now; the owner stays ended.
	if err := o.Valid(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Valid after the late answers: %v, want ErrLeaseLost", err)
	}
	if cause := context.Cause(o.Context()); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", cause)
	}
}
