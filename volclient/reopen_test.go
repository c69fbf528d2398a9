package volclient

import (
	"context"
	"errors"
	"testing"

	"github.com/nvstripe/nvstripe/meta"
)

// TestReopenRetriesWhileTheLostLeaseGoes: the claim of a reopen is refused
// because the lost epoch's own lease was still in etcd (etcd, back from an
// outage, has not expired it yet), and the lease goes before the refusal is
// looked at: the refusal is still one to retry, not a takeover.
func TestReopenRetriesWhileTheLostLeaseGoes(t *testing.T) {
	ctx := context.Background()
	s := newClusterStore(t)
	ns := meta.NamespaceSpec{Host: "h0", NQN: "nqn.2026-12.io.nvstripe:reopen", NSID: 1, Size: 8 << 20,
		Paths: []meta.PathRecord{{Addr: "tcp://127.0.0.1:9"}}} // only recorded: nothing connects
	if _, err := s.AddNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: 1 << 20, Layout: meta.Layout{K: 1, M: 0, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	lost, err := s.Acquire(ctx, "v", meta.OwnerOptions{Holder: "A"})
	if err != nil {
		t.Fatal(err)
	}
	_, refused := s.Acquire(ctx, "v", meta.OwnerOptions{Holder: "A"})
	if !errors.Is(refused, meta.ErrBusy) {
		t.Fatalf("second claim: %v, want ErrBusy", refused)
	}
	if err := lost.Release(ctx); err != nil { // etcd expires the lost lease
		t.Fatal(err)
	}
	if err := stillOurs("v", lost.Epoch(), refused); errors.Is(err, meta.ErrBusy) {
		t.Errorf("refused by the lost epoch's own lease: %v; want an error to retry, not ErrBusy", err)
	}
	other, err := s.Acquire(ctx, "v", meta.OwnerOptions{Holder: "B"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	_, refused = s.Acquire(ctx, "v", meta.OwnerOptions{Holder: "A"})
	if err := stillOurs("v", lost.Epoch(), refused); !errors.Is(err, meta.ErrBusy) {
		t.Errorf("refused by B's lease: %v; want ErrBusy", err)
	}
}
