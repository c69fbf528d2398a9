package meta

import (
	"context"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta/etcdembed"
)

// TestStoreRedialsEtcdOften: while etcd is gone the Store's client keeps
// trying to connect at a capped pace, so it finds etcd soon after it comes
// back. Its port is held meanwhile by a listener that counts connections and
// drops each one: gRPC's own backoff (growing to 120 s) makes its 12th
// attempt after about three minutes and fails the wait; the cap (2 s) makes
// it in about 16 s. Then etcd returns on that port and the same Store reads
// from it again.
func TestStoreRedialsEtcdOften(t *testing.T) {
	needEtcd(t)
	dir := t.TempDir()
	e, err := etcdembed.Start(context.Background(), etcdembed.Options{Dir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(e.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), Config{Endpoints: e.Endpoints(), Cluster: "redial"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go keepReading(s, done) // a daemon keeps using its Store

	_ = e.Close()
	l, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Fatalf("take etcd's port %s: %v", u.Host, err)
	}
	var dials atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			_ = c.Close()
		}
	}()
	testutil.WaitFor(t, "12 connection attempts while etcd is gone", func() bool { return dials.Load() >= 12 })
	_ = l.Close()

	e, err = etcdembed.Start(context.Background(), etcdembed.Options{Dir: dir, Fast: true, ClientAddr: u.Host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	testutil.WaitFor(t, "the Store to read from etcd again", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := s.cli.Get(ctx, "k")
		return err == nil
	})
}

// keepReading reads from s every 100 ms until done is closed.
func keepReading(s *Store, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-time.After(100 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = s.cli.Get(ctx, "k")
		cancel()
	}
}
