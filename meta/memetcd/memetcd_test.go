package memetcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The conformance suite (meta/metatest) checks what memetcd shares with
// etcd; these check what is its own: the hand-moved clock and closing.

// TestClockExpiresLeases: a lease lives exactly its TTL of the server's
// clock from its grant or last renewal, whatever real time passes.
func TestClockExpiresLeases(t *testing.T) {
	ctx := context.Background()
	s := New(Options{Clock: NewClock(time.Unix(1_700_000_000, 0))})
	defer s.Close()
	c := s.Client()
	defer c.Close()
	l, err := c.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/k", "", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	alive := func() bool {
		r, err := c.Get(ctx, "/k")
		if err != nil {
			t.Fatal(err)
		}
		return r.Count == 1
	}
	s.Clock().Advance(4 * time.Second)
	if ttl, err := c.TimeToLive(ctx, l.ID); err != nil || ttl.TTL != 1 || !alive() {
		t.Fatalf("4s into a 5s lease: TTL %v, %v, key there %v; want 1s left", ttl, err, alive())
	}
	if _, err := c.KeepAliveOnce(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	s.Clock().Advance(4 * time.Second)
	if !alive() {
		t.Fatal("lease expired 4s after a renewal")
	}
	s.Clock().Advance(time.Second)
	if alive() {
		t.Fatal("lease alive 5s after its last renewal")
	}
}

// TestCloseEndsWatches: a watch sees a write made right after Watch
// returned; closing a client ends its watches (not another client's);
// closing the server ends every watch and refuses requests.
func TestCloseEndsWatches(t *testing.T) {
	// A watch that misses its event ends with ctx: the test fails, not hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := New(Options{})
	a, b := s.Client(), s.Client()
	defer b.Close()
	wa, wb := a.Watch(ctx, "/k"), b.Watch(ctx, "/k")
	if err := a.Close(); err == nil {
		t.Fatal("a client without a connection reports its cancelled context on Close, as clientv3's")
	}
	if _, ok := <-wa; ok {
		t.Fatal("watch of a closed client still open")
	}
	if _, err := b.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	if wr := <-wb; len(wr.Events) != 1 {
		t.Fatalf("other client's watch: %v", wr.Events)
	}
	s.Close()
	if _, ok := <-wb; ok {
		t.Fatal("watch open after the server closed")
	}
	if _, err := b.Get(ctx, "/k"); err == nil {
		t.Fatal("read from a closed server succeeded")
	}
}
