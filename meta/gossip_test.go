package meta

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestGossipSeeds: registered members are listed; one whose lease is lost
// registers again; Close removes the record at once; bad records are
// refused.
func TestGossipSeeds(t *testing.T) {
	s := newStore(t)
	ctx := testCtx(t)
	seeds := func() string {
		t.Helper()
		recs, err := s.GossipSeeds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, r := range recs {
			out += fmt.Sprintf("%s=%s/%s@%s ", r.Name, r.Role, r.Host, r.Addr)
		}
		return out
	}
	a, err := s.RegisterGossip(ctx, GossipRecord{Name: "h1", Role: "target", Host: "h1", Addr: "127.0.0.1:7946"}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := s.RegisterGossip(ctx, GossipRecord{Name: "controller.x", Role: "controller", Host: "x", Addr: "127.0.0.1:7947"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seeds(), "controller.x=controller/x@127.0.0.1:7947 h1=target/h1@127.0.0.1:7946 "; got != want {
		t.Fatalf("seeds %q, want %q", got, want)
	}
	cli := rawClient(t)
	resp, err := cli.Get(ctx, s.keys.gossip("h1"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get: %v %v", resp, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil { // as if etcd expired it
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // bounds a broken test only
	for seeds() != "controller.x=controller/x@127.0.0.1:7947 h1=target/h1@127.0.0.1:7946 " {
		if time.Now().After(deadline) {
			t.Fatalf("h1 not registered again after losing its lease: %q", seeds())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := seeds(); got != "h1=target/h1@127.0.0.1:7946 " {
		t.Fatalf("after Close: %q", got)
	}
	for _, bad := range []GossipRecord{{Name: "a/b", Addr: "127.0.0.1:1"}, {Name: "a", Addr: "nowhere"}} {
		if _, err := s.RegisterGossip(ctx, bad, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("RegisterGossip(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := s.RegisterGossip(ctx, GossipRecord{Name: "a", Addr: "127.0.0.1:1"}, time.Second); !errors.Is(err, ErrInvalid) {
		t.Errorf("TTL 1s: %v", err)
	}
}
