package volclient

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/meta"
)

// sessionOn opens namespace id for the session of volume vol at epoch over
// its own connections; fenced counts the session's Fenced calls.
func sessionOn(t *testing.T, s *meta.Store, c *meta.ClusterRecord, vol string, epoch int64, id string) (blockdev.Device, *atomic.Int32, error) {
	t.Helper()
	fenced := new(atomic.Int32)
	n, err := NewNamespaces(context.Background(), s, NamespaceOptions{
		Session: NewSession(c, vol, epoch, func(error) { fenced.Add(1) })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	d, err := n.Device(context.Background(), id)
	return d, fenced, err
}

// TestSessionFencing: on one shared namespace over real NVMe/TCP, a newer
// session of volume v fences the older one (its writes fail ErrFenced and
// its Fenced hook runs), leaves the session of volume w writing, lets a
// reader without a session read, and a session older than the current one
// is refused at open (ErrFenced, hook run).
func TestSessionFencing(t *testing.T) {
	ctx := context.Background()
	s, c, _, rec := newServedNamespace(t)
	buf := make([]byte, 4096)
	write := func(d blockdev.Device) error { return d.WriteAt(ctx, buf, 1<<20) }

	a, fencedA, err := sessionOn(t, s, c, "v", 10, rec.ID)
	if err != nil {
		t.Fatalf("session v@10: %v", err)
	}
	w, fencedW, err := sessionOn(t, s, c, "w", 11, rec.ID)
	if err != nil {
		t.Fatalf("session w@11: %v", err)
	}
	if err := errors.Join(write(a), write(w)); err != nil {
		t.Fatalf("writes before the takeover: %v", err)
	}
	b, _, err := sessionOn(t, s, c, "v", 20, rec.ID)
	if err != nil {
		t.Fatalf("session v@20 taking over: %v", err)
	}
	if err := write(b); err != nil {
		t.Fatalf("the new owner's write: %v", err)
	}
	if err := write(a); blockdev.Class(err) != blockdev.ErrFenced {
		t.Fatalf("the stale owner's write after the takeover: %v, want ErrFenced", err)
	}
	if err := a.Flush(ctx); blockdev.Class(err) != blockdev.ErrFenced {
		t.Fatalf("the stale owner's flush after the takeover: %v, want ErrFenced", err)
	}
	if fencedA.Load() == 0 {
		t.Error("the stale owner's Fenced hook never ran")
	}
	if err := write(w); err != nil || fencedW.Load() != 0 {
		t.Fatalf("volume w's owner after v's takeover: write %v, fenced %d times", err, fencedW.Load())
	}
	if err := a.ReadAt(ctx, buf, 1<<20); err != nil {
		t.Fatalf("the fenced session reads: %v", err)
	}
	ro, err := NewNamespaces(ctx, s, NamespaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	r, err := ro.Device(ctx, rec.ID)
	if err != nil {
		t.Fatalf("a reader without a session: %v", err)
	}
	if err := r.ReadAt(ctx, buf, 1<<20); err != nil {
		t.Fatalf("a reader without a session reads: %v", err)
	}
	if err := write(r); blockdev.Class(err) != blockdev.ErrFenced {
		t.Fatalf("a write without a session: %v, want ErrFenced", err)
	}
	_, fencedC, err := sessionOn(t, s, c, "v", 15, rec.ID)
	if blockdev.Class(err) != blockdev.ErrFenced || fencedC.Load() == 0 {
		t.Fatalf("a session older than the owner's: %v (hook run %d times), want ErrFenced", err, fencedC.Load())
	}
	if err := write(b); err != nil {
		t.Fatalf("the owner after a stale session tried: %v", err)
	}
}
