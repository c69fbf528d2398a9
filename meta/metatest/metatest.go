// Package metatest starts an embedded etcd on free 127.0.0.1 ports for
// tests, with fast timing and no fsync, stopped when the test ends, and
// compacts an etcd's history (to test reads at a compacted revision).
package metatest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nvstripe/nvstripe/meta/etcdembed"
	"github.com/nvstripe/nvstripe/meta/memetcd"
)

// Start starts an etcd server for t and returns its client endpoints. The
// server and its data directory are removed when t ends.
func Start(t testing.TB) []string {
	t.Helper()
	return StartServer(t).Endpoints()
}

// StartServer is Start returning the server itself (to stop it early and
// test what clients do when etcd goes away).
func StartServer(t testing.TB) *etcdembed.Server {
	t.Helper()
	s, err := etcdembed.Start(context.Background(), etcdembed.Options{Dir: t.TempDir(), Fast: true})
	if err != nil {
		t.Fatalf("metatest: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Compact writes a marker key outside every cluster's prefix (a new
// revision) and compacts the etcd at endpoints up to it, so that every
// revision read before the call is gone. It returns the compacted revision.
func Compact(t testing.TB, endpoints []string) int64 {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("metatest: %v", err)
	}
	defer cli.Close()
	return CompactClient(t, cli)
}

// CompactClient is Compact through a client (of an in-memory etcd, say).
func CompactClient(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Put(ctx, "/metatest/compact", "")
	if err != nil {
		t.Fatalf("metatest: %v", err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("metatest: compact at %d: %v", rev, err)
	}
	return rev
}

// CompactMem is Compact on an in-memory etcd.
func CompactMem(t testing.TB, s *memetcd.Server) int64 {
	t.Helper()
	cli := s.Client()
	defer cli.Close()
	return CompactClient(t, cli)
}

// EnableAuth turns on authentication in the etcd at endpoints with the
// user root (role root) and password: clients need credentials after it.
func EnableAuth(t testing.TB, endpoints []string, password string) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("metatest: %v", err)
	}
	defer c.Close()
	ctx := context.Background()
	steps := []func() error{
		func() error { _, err := c.RoleAdd(ctx, "root"); return err },
		func() error { _, err := c.UserAdd(ctx, "root", password); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("metatest: enable auth: %v", err)
		}
	}
}

// Mem returns an in-memory etcd for t on the real clock (leases expire in
// real time, as an embedded etcd's). It is closed when t ends.
func Mem(t testing.TB) *memetcd.Server {
	s := memetcd.New(memetcd.Options{})
	t.Cleanup(s.Close)
	return s
}

// MemClock returns an in-memory etcd for t whose leases expire only when
// the test moves its clock (Clock().Advance). It is closed when t ends.
func MemClock(t testing.TB) *memetcd.Server {
	s := memetcd.New(memetcd.Options{Clock: memetcd.NewClock(time.Unix(1_700_000_000, 0))})
	t.Cleanup(s.Close)
	return s
}
