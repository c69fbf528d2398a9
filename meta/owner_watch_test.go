package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nvstripe/nvstripe/internal/faultnet"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta/metatest"
)

// cutOwner is an owner whose store reaches its own etcd (compaction is
// etcd-wide: not the shared server) through a proxy that a test can cut,
// beside a store and a raw client that reach etcd directly.
type cutOwner struct {
	eps   []string
	proxy *faultnet.Proxy
	reads *switchKV // the proxied store's reads, which a test can fail
	s     *Store    // direct
	raw   *clientv3.Client
	o     *Owner // through the proxy
	key   string
}

func newCutOwner(t *testing.T, ttl time.Duration) *cutOwner {
	t.Helper()
	needEtcd(t) // cuts the connection to a real etcd
	ctx := testCtx(t)
	c := &cutOwner{eps: metatest.Start(t)}
	var err error
	if c.s, err = Open(ctx, Config{Endpoints: c.eps, Cluster: "c"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.s.Close() })
	populate(t, c.s, 3, 1, 4)
	addVolume(t, c.s, "vol", 2, 1, 2)
	if c.proxy, err = faultnet.New(strings.TrimPrefix(c.eps[0], "http://")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.proxy.Close() })
	ps, err := Open(ctx, Config{Endpoints: []string{c.proxy.Addr()}, Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	c.reads = &switchKV{KV: ps.kv}
	ps.kv = c.reads
	if c.o, err = ps.Acquire(ctx, "vol", OwnerOptions{Holder: "node-a", TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.o.Release(context.Background()) })
	c.raw, c.key = rawClientAt(t, c.eps), c.s.keys.ownerRW("vol")
	return c
}

// breakWatch cuts the owner off etcd, runs meanwhile, compacts etcd's
// history past the owner's epoch and lets the owner back: its watch of the
// owner key resumes from a compacted revision and fails.
// It returns the revision etcd compacted up to.
func (c *cutOwner) breakWatch(t *testing.T, meanwhile func()) int64 {
	t.Helper()
	c.proxy.Partition()
	meanwhile()
	// A write after the epoch: etcd keeps the revision it compacts up to,
	// and the watch resumes from the one after the epoch.
	if _, err := c.raw.Put(testCtx(t), "/owner-watch-test", ""); err != nil {
		t.Fatal(err)
	}
	rev := metatest.Compact(t, c.eps)
	c.proxy.Heal()
	return rev
}

func (c *cutOwner) deleteKey(t *testing.T) {
	t.Helper()
	if resp, err := c.raw.Delete(testCtx(t), c.key); err != nil || resp.Deleted != 1 {
		t.Fatalf("delete the owner key: %v (%v deleted)", err, resp)
	}
}

// compactedCause checks that the owner ended because its watch broke at
// a compaction up to rev and then why.
func compactedCause(t *testing.T, o *Owner, rev int64, why string) {
	t.Helper()
	cause := context.Cause(o.Context())
	if !errors.Is(cause, ErrLeaseLost) || !strings.Contains(cause.Error(), fmt.Sprintf("compacted its history up to revision %d", rev)) ||
		!strings.Contains(cause.Error(), why) {
		t.Fatalf("cause %v; want ErrLeaseLost after the compaction up to revision %d: %s", cause, rev, why)
	}
}

func rawClientAt(t *testing.T, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: nopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// switchKV is a KV whose reads fail as an unreachable etcd's while fail is
// set.
type switchKV struct {
	clientv3.KV
	fail atomic.Bool
}

func (k *switchKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if k.fail.Load() {
		return nil, context.DeadlineExceeded
	}
	return k.KV.Get(ctx, key, opts...)
}

// waitFor is testutil.WaitFor under this package's old name.
var waitFor = testutil.WaitFor

// TestOwnerSurvivesCompactedWatch: an owner cut off etcd briefly (its
// lease outlives the cut) while etcd compacts past its watch's revision
// keeps its ownership, same epoch, same key: the broken watch is replaced
// by a read of the key and a watch from it. That new watch works: deleting
// the key (the lease stays, so only the watch can tell) ends the
// ownership.
func TestOwnerSurvivesCompactedWatch(t *testing.T) {
	c := newCutOwner(t, 30*time.Second)
	c.breakWatch(t, func() {})
	waitFor(t, "the owner key to be watched again", func() bool {
		return c.o.rewatches.Load() == 1 || c.o.Context().Err() != nil
	})
	if err := c.o.Context().Err(); err != nil {
		t.Fatalf("owner fenced by a compacted watch: %v", context.Cause(c.o.Context()))
	}
	owners, err := c.s.Owners(testCtx(t), "vol")
	if err != nil || len(owners) != 1 || owners[0].Epoch != c.o.Epoch() || owners[0].Holder != "node-a" {
		t.Fatalf("owners after the broken watch: %+v, %v; want node-a of epoch %d alone", owners, err, c.o.Epoch())
	}
	if _, err := c.raw.Delete(testCtx(t), c.key); err != nil {
		t.Fatal(err)
	}
	waitDone(t, c.o.Context(), "after the key was deleted")
	if cause := context.Cause(c.o.Context()); !errors.Is(cause, ErrLeaseLost) || !strings.Contains(cause.Error(), "owner key deleted") {
		t.Fatalf("cause %v, want the deleted key (seen by the new watch)", cause)
	}
}

// TestOwnerFencedAfterCompactedWatch: while the owner's watch is broken by
// a compaction, its key is deleted and created again; read again, the key
// is not the owner's, and the ownership ends. Created again by another
// owner, and under the owner's own lease (only the create revision tells
// it apart), or only deleted.
func TestOwnerFencedAfterCompactedWatch(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		meanwhile func(t *testing.T, c *cutOwner)
	}{
		{"taken by another owner", "owner key created again", func(t *testing.T, c *cutOwner) {
			c.deleteKey(t)
			o, err := c.s.Acquire(testCtx(t), "vol", OwnerOptions{Holder: "node-b"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { o.Release(context.Background()) })
		}},
		{"put again under the same lease", "owner key created again", func(t *testing.T, c *cutOwner) {
			c.deleteKey(t)
			if _, err := c.raw.Put(testCtx(t), c.key, "{}", clientv3.WithLease(c.o.lease)); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted", "owner key deleted", func(t *testing.T, c *cutOwner) { c.deleteKey(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCutOwner(t, 30*time.Second)
			rev := c.breakWatch(t, func() { tc.meanwhile(t, c) })
			waitDone(t, c.o.Context(), "after the key was replaced")
			compactedCause(t, c.o, rev, "key read again: "+tc.why)
		})
	}
}

// TestOwnerFencedWhenKeyUnreadable: the owner's watch breaks at a
// compaction, and its reads of the key fail as if etcd did not answer,
// while its lease is renewed: the ownership ends once the key could not be
// read within the TTL less the margin, as without renewals.
func TestOwnerFencedWhenKeyUnreadable(t *testing.T) {
	c := newCutOwner(t, 9*time.Second) // renewals every 3s: slack for the reconnection
	rev := c.breakWatch(t, func() { c.reads.fail.Store(true) })
	waitDone(t, c.o.Context(), "with the key unreadable")
	compactedCause(t, c.o, rev, "could not be read again within the TTL less the safety margin (read the owner key: ")
	if ttl, err := c.raw.TimeToLive(testCtx(t), c.o.lease); err != nil || ttl.TTL <= 0 {
		t.Fatalf("the lease was not renewed until the end (TTL %+v, %v): the renewal deadline, not the read's, ended the owner", ttl, err)
	}
}
