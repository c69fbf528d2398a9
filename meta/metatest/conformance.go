package metatest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Backend is an etcd under test: the conformance suite's view of it.
type Backend struct {
	// Client returns a new client of the etcd; the suite closes it.
	Client func(t testing.TB) *clientv3.Client
	// Pass lets d go by for the etcd's leases: a hand-moved clock advances,
	// a real etcd is waited for.
	Pass func(t testing.TB, d time.Duration)
}

// Conformance lists the suite's checks by name. Each gets a fresh,
// empty etcd from its backend.
var Conformance = map[string]func(t *testing.T, b Backend){
	"Revisions":         testRevisions,
	"GuardedTxn":        testGuardedTxn,
	"Conflict":          testConflict,
	"RefusedTxn":        testRefusedTxn,
	"Prefix":            testPrefix,
	"Compaction":        testCompaction,
	"LeaseRevoke":       testLeaseRevoke,
	"LeaseExpiry":       testLeaseExpiry,
	"LeaseKeepAlive":    testLeaseKeepAlive,
	"WatchOrder":        testWatchOrder,
	"WatchFromRevision": testWatchFromRevision,
	"WatchCompacted":    testWatchCompacted,
	"WatchProgress":     testWatchProgress,
}

// RunConformance runs every check of Conformance against the etcds that
// newBackend starts, one per check.
func RunConformance(t *testing.T, newBackend func(t *testing.T) Backend) {
	for name, f := range Conformance {
		t.Run(name, func(t *testing.T) { f(t, newBackend(t)) })
	}
}

func ctxOf(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func client(t testing.TB, b Backend) *clientv3.Client {
	t.Helper()
	c := b.Client(t)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// must(f())(t) is f's result; an error fails t.
func must[R any](r R, err error) func(testing.TB) R {
	return func(t testing.TB) R {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// value returns key's value at rev (0: now) and whether it exists.
func value(t testing.TB, c *clientv3.Client, key string, rev int64) (string, bool) {
	t.Helper()
	r := must(c.Get(ctxOf(t), key, clientv3.WithRev(rev)))(t)
	if len(r.Kvs) == 0 {
		return "", false
	}
	return string(r.Kvs[0].Value), true
}

func testRevisions(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	r1 := must(c.Put(ctx, "/k", "one"))(t).Header.Revision
	r2 := must(c.Put(ctx, "/k", "two"))(t).Header.Revision
	if r2 != r1+1 {
		t.Fatalf("second put at revision %d, want %d", r2, r1+1)
	}
	kv := must(c.Get(ctx, "/k"))(t).Kvs[0]
	if kv.CreateRevision != r1 || kv.ModRevision != r2 || kv.Version != 2 {
		t.Fatalf("after two puts: create %d mod %d version %d, want %d %d 2", kv.CreateRevision, kv.ModRevision, kv.Version, r1, r2)
	}
	if v, _ := value(t, c, "/k", r1); v != "one" {
		t.Fatalf("read at revision %d: %q, want one", r1, v)
	}
	r3 := must(c.Delete(ctx, "/k"))(t).Header.Revision
	if _, ok := value(t, c, "/k", 0); ok {
		t.Fatal("deleted key still read")
	}
	if v, _ := value(t, c, "/k", r2); v != "two" {
		t.Fatalf("read at revision %d after delete: %q, want two", r2, v)
	}
	// Deleting nothing and reading make no revision.
	if r := must(c.Delete(ctx, "/k"))(t).Header.Revision; r != r3 {
		t.Fatalf("a delete of nothing moved the revision to %d from %d", r, r3)
	}
	r4 := must(c.Put(ctx, "/k", "three"))(t).Header.Revision
	kv = must(c.Get(ctx, "/k"))(t).Kvs[0]
	if r4 != r3+1 || kv.CreateRevision != r4 || kv.Version != 1 {
		t.Fatalf("put after delete: revision %d create %d version %d, want %d %d 1", r4, kv.CreateRevision, kv.Version, r3+1, r4)
	}
}

func testGuardedTxn(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	// Create only if absent.
	create := func() *clientv3.TxnResponse {
		return must(c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("/a"), "=", 0)).
			Then(clientv3.OpPut("/a", "1"), clientv3.OpPut("/b", "1")).Else(clientv3.OpGet("/a")).Commit())(t)
	}
	first := create()
	if !first.Succeeded {
		t.Fatal("create of an absent key failed")
	}
	again := create()
	if again.Succeeded || again.Header.Revision != first.Header.Revision {
		t.Fatalf("second create: succeeded %v at revision %d, want a failure at %d", again.Succeeded, again.Header.Revision, first.Header.Revision)
	}
	if got := again.Responses[0].GetResponseRange().Kvs; len(got) != 1 || string(got[0].Value) != "1" {
		t.Fatalf("else branch read %v, want /a=1", got)
	}
	rev := first.Header.Revision
	if kv := must(c.Get(ctx, "/b"))(t).Kvs[0]; kv.ModRevision != rev {
		t.Fatalf("the two puts of one transaction at revisions %d and %d", rev, kv.ModRevision)
	}
	// Update only if unchanged since the read.
	upd := func(modRev int64, v string) bool {
		return must(c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("/a"), "=", modRev)).Then(clientv3.OpPut("/a", v)).Commit())(t).Succeeded
	}
	if !upd(rev, "2") {
		t.Fatal("update at the revision read failed")
	}
	if upd(rev, "3") {
		t.Fatal("update at a stale revision succeeded")
	}
	if v, _ := value(t, c, "/a", 0); v != "2" {
		t.Fatalf("/a = %q after a stale update, want 2", v)
	}
	// Value and version compares; a range compare holds for every key.
	ok := must(c.Txn(ctx).If(clientv3.Compare(clientv3.Value("/a"), "=", "2"), clientv3.Compare(clientv3.Version("/a"), "=", 2),
		clientv3.Compare(clientv3.Version("/"), ">", 0).WithPrefix()).Commit())(t).Succeeded
	if !ok {
		t.Fatal("value, version and prefix compares that hold failed")
	}
	if must(c.Txn(ctx).If(clientv3.Compare(clientv3.Value("/none"), "=", "")).Commit())(t).Succeeded {
		t.Fatal("a value compare of a missing key held")
	}
}

func testConflict(t *testing.T, b Backend) {
	ctx := ctxOf(t)
	c := client(t, b)
	rev := must(c.Put(ctx, "/n", "0"))(t).Header.Revision
	const writers = 8
	var wg sync.WaitGroup
	won := make(chan int, writers)
	for i := range writers {
		wc := client(t, b)
		wg.Go(func() {
			r, err := wc.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("/n"), "=", rev)).Then(clientv3.OpPut("/n", fmt.Sprint(i+1))).Commit()
			if err == nil && r.Succeeded {
				won <- i + 1
			}
		})
	}
	wg.Wait()
	close(won)
	var winners []int
	for w := range won {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("%d writers won a transaction guarded by one revision, want 1", len(winners))
	}
	if v, _ := value(t, c, "/n", 0); v != fmt.Sprint(winners[0]) {
		t.Fatalf("/n = %s, want the winner's %d", v, winners[0])
	}
}

func testRefusedTxn(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	rev := must(c.Put(ctx, "/x", "0"))(t).Header.Revision
	refused := []struct {
		name string
		err  error
		txn  clientv3.Txn
	}{
		{"a key put twice", rpctypes.ErrDuplicateKey, c.Txn(ctx).Then(clientv3.OpPut("/y", "1"), clientv3.OpPut("/y", "2"))},
		{"a put in a deleted range", rpctypes.ErrDuplicateKey, c.Txn(ctx).Then(clientv3.OpDelete("/", clientv3.WithPrefix()), clientv3.OpPut("/y", "2"))},
		{"a lease that does not exist", rpctypes.ErrLeaseNotFound, c.Txn(ctx).Then(clientv3.OpPut("/y", "1"), clientv3.OpPut("/z", "1", clientv3.WithLease(0x1234)))},
		{"too many operations", rpctypes.ErrTooManyOps, c.Txn(ctx).Then(manyPuts(129)...)},
	}
	for _, r := range refused {
		if _, err := r.txn.Commit(); !errors.Is(err, r.err) {
			t.Errorf("transaction with %s: %v, want %v", r.name, err, r.err)
		}
	}
	if now := must(c.Get(ctx, "/", clientv3.WithPrefix()))(t); now.Header.Revision != rev || now.Count != 1 {
		t.Fatalf("after refused transactions: revision %d, %d keys; want %d, 1", now.Header.Revision, now.Count, rev)
	}
}

func manyPuts(n int) []clientv3.Op {
	ops := make([]clientv3.Op, n)
	for i := range ops {
		ops[i] = clientv3.OpPut(fmt.Sprintf("/many/%03d", i), "")
	}
	return ops
}

func testPrefix(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	for _, k := range []string{"/p/b", "/p/a", "/p0", "/o", "/p/c"} {
		must(c.Put(ctx, k, k))(t)
	}
	r := must(c.Get(ctx, "/p/", clientv3.WithPrefix()))(t)
	if got := keysOf(r); got != "/p/a /p/b /p/c" || r.Count != 3 {
		t.Fatalf("prefix /p/: %q (count %d), want /p/a /p/b /p/c", got, r.Count)
	}
	r = must(c.Get(ctx, "/p/", clientv3.WithPrefix(), clientv3.WithLimit(2)))(t)
	if got := keysOf(r); got != "/p/a /p/b" || !r.More || r.Count != 3 {
		t.Fatalf("prefix /p/ limit 2: %q more %v count %d, want /p/a /p/b, more, count 3", got, r.More, r.Count)
	}
	r = must(c.Get(ctx, "/p/", clientv3.WithPrefix(), clientv3.WithCountOnly()))(t)
	if len(r.Kvs) != 0 || r.Count != 3 {
		t.Fatalf("count only: %d kvs, count %d", len(r.Kvs), r.Count)
	}
	r = must(c.Get(ctx, "/p/", clientv3.WithFirstCreate()...))(t)
	if got := keysOf(r); got != "/p/b" {
		t.Fatalf("first created under /p/: %q, want /p/b", got)
	}
	r = must(c.Get(ctx, "/p", clientv3.WithRange("/p0"), clientv3.WithKeysOnly()))(t)
	if got := keysOf(r); got != "/p/a /p/b /p/c" || len(r.Kvs[0].Value) != 0 {
		t.Fatalf("range [/p, /p0) keys only: %q", got)
	}
	d := must(c.Delete(ctx, "/p/", clientv3.WithPrefix(), clientv3.WithPrevKV()))(t)
	if d.Deleted != 3 || len(d.PrevKvs) != 3 {
		t.Fatalf("delete prefix: %d deleted, %d previous values, want 3", d.Deleted, len(d.PrevKvs))
	}
	if got := keysOf(must(c.Get(ctx, "/", clientv3.WithPrefix()))(t)); got != "/o /p0" {
		t.Fatalf("after deleting /p/: %q, want /o /p0", got)
	}
}

func keysOf(r *clientv3.GetResponse) string {
	s := ""
	for i, kv := range r.Kvs {
		if i > 0 {
			s += " "
		}
		s += string(kv.Key)
	}
	return s
}

func testCompaction(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	r1 := must(c.Put(ctx, "/k", "1"))(t).Header.Revision
	r2 := must(c.Put(ctx, "/k", "2"))(t).Header.Revision
	must(c.Put(ctx, "/gone", "x"))(t)
	r3 := must(c.Delete(ctx, "/gone"))(t).Header.Revision
	must(c.Compact(ctx, r3, clientv3.WithCompactPhysical()))(t)
	if _, err := c.Get(ctx, "/k", clientv3.WithRev(r1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("read at compacted revision %d: %v, want %v", r1, err, rpctypes.ErrCompacted)
	}
	if v, _ := value(t, c, "/k", r3); v != "2" {
		t.Fatalf("read at the compaction revision: %q, want 2 (put at %d)", v, r2)
	}
	if r := must(c.Get(ctx, "/", clientv3.WithPrefix()))(t); keysOf(r) != "/k" {
		t.Fatalf("after compaction: %q, want /k", keysOf(r))
	}
	if _, err := c.Compact(ctx, r3); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("compacting again at %d: %v, want %v", r3, err, rpctypes.ErrCompacted)
	}
	if _, err := c.Get(ctx, "/k", clientv3.WithRev(r3+10)); !errors.Is(err, rpctypes.ErrFutureRev) {
		t.Fatalf("read at a future revision: %v, want %v", err, rpctypes.ErrFutureRev)
	}
}

func testLeaseRevoke(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	l := must(c.Grant(ctx, 30))(t)
	must(c.Put(ctx, "/l/1", "", clientv3.WithLease(l.ID)))(t)
	must(c.Put(ctx, "/l/2", "", clientv3.WithLease(l.ID)))(t)
	must(c.Put(ctx, "/l/3", ""))(t)
	ttl := must(c.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys()))(t)
	if ttl.GrantedTTL != 30 || ttl.TTL <= 0 || ttl.TTL > 30 || len(ttl.Keys) != 2 {
		t.Fatalf("time to live: granted %d, left %d, %d keys; want 30, (0, 30], 2", ttl.GrantedTTL, ttl.TTL, len(ttl.Keys))
	}
	before := must(c.Get(ctx, "/l/3"))(t).Header.Revision
	rv := must(c.Revoke(ctx, l.ID))(t)
	if rv.Header.Revision != before+1 {
		t.Fatalf("revoke deleted its keys at revision %d, want one revision: %d", rv.Header.Revision, before+1)
	}
	if got := keysOf(must(c.Get(ctx, "/l/", clientv3.WithPrefix()))(t)); got != "/l/3" {
		t.Fatalf("after revoke: %q, want /l/3", got)
	}
	if ttl := must(c.TimeToLive(ctx, l.ID))(t); ttl.TTL != -1 {
		t.Fatalf("time to live of a revoked lease: %d, want -1", ttl.TTL)
	}
	if _, err := c.KeepAliveOnce(ctx, l.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("keep-alive of a revoked lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
	if _, err := c.Revoke(ctx, l.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("revoking twice: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
	if _, err := c.Put(ctx, "/l/1", "", clientv3.WithLease(l.ID)); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("put with a revoked lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
}

// eventually polls cond until it holds (at once on a hand-moved clock; a
// real etcd checks expiry twice a second).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not after 10s", what)
}

func testLeaseExpiry(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	l := must(c.Grant(ctx, 1))(t)
	must(c.Put(ctx, "/e", "", clientv3.WithLease(l.ID)))(t)
	w := c.Watch(ctx, "/e", clientv3.WithRev(must(c.Get(ctx, "/e"))(t).Header.Revision+1))
	b.Pass(t, 2*time.Second)
	eventually(t, "key of an expired lease deleted", func() bool { _, ok := value(t, c, "/e", 0); return !ok })
	wr := <-w
	if len(wr.Events) != 1 || wr.Events[0].Type != clientv3.EventTypeDelete {
		t.Fatalf("watch of a key whose lease expired: %v, want one delete", wr.Events)
	}
	if _, err := c.KeepAliveOnce(ctx, l.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("keep-alive of an expired lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
}

func testLeaseKeepAlive(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	l := must(c.Grant(ctx, 3))(t)
	must(c.Put(ctx, "/k", "", clientv3.WithLease(l.ID)))(t)
	for range 2 {
		b.Pass(t, 2*time.Second)
		if r := must(c.KeepAliveOnce(ctx, l.ID))(t); r.TTL != 3 {
			t.Fatalf("keep-alive: TTL %d, want 3", r.TTL)
		}
	}
	if _, ok := value(t, c, "/k", 0); !ok {
		t.Fatal("key of a lease kept alive past its TTL is gone")
	}
	ka := must(c.KeepAlive(ctx, l.ID))(t)
	if r, ok := <-ka; !ok || r.ID != l.ID {
		t.Fatalf("KeepAlive's first answer: %v %v", r, ok)
	}
}

// collect reads watch responses until n events came.
func collect(t testing.TB, w clientv3.WatchChan, n int) []*clientv3.Event {
	t.Helper()
	var evs []*clientv3.Event
	for len(evs) < n {
		wr, ok := <-w
		if !ok || wr.Err() != nil {
			t.Fatalf("watch ended after %d of %d events: %v", len(evs), n, wr.Err())
		}
		evs = append(evs, wr.Events...)
	}
	return evs
}

func describe(evs []*clientv3.Event) string {
	s := ""
	for _, e := range evs {
		s += fmt.Sprintf("%s %s@%d;", e.Type, e.Kv.Key, e.Kv.ModRevision)
	}
	return s
}

func writeSome(t testing.TB, c *clientv3.Client) (first int64, want string) {
	ctx := ctxOf(t)
	r1 := must(c.Put(ctx, "/w/a", "1"))(t).Header.Revision
	must(c.Put(ctx, "/other", "x"))(t)
	r3 := must(c.Txn(ctx).Then(clientv3.OpPut("/w/b", "1"), clientv3.OpDelete("/w/a")).Commit())(t).Header.Revision
	r4 := must(c.Put(ctx, "/w/b", "2"))(t).Header.Revision
	return r1, fmt.Sprintf("PUT /w/a@%d;PUT /w/b@%d;DELETE /w/a@%d;PUT /w/b@%d;", r1, r3, r3, r4)
}

// testWatchOrder: a watch delivers its range's events in revision order,
// from a given revision or, without one, from when Watch returned.
func testWatchOrder(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	w := c.Watch(ctx, "/w/", clientv3.WithPrefix(), clientv3.WithRev(must(c.Get(ctx, "/"))(t).Header.Revision+1))
	now := c.Watch(ctx, "/w/", clientv3.WithPrefix())
	_, want := writeSome(t, c)
	if got := describe(collect(t, w, 4)); got != want {
		t.Fatalf("watch events:\n got %s\nwant %s", got, want)
	}
	if got := describe(collect(t, now, 4)); got != want {
		t.Fatalf("watch from now, written to right after it returned:\n got %s\nwant %s", got, want)
	}
}

func testWatchFromRevision(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	first, want := writeSome(t, c)
	if got := describe(collect(t, c.Watch(ctx, "/w/", clientv3.WithPrefix(), clientv3.WithRev(first)), 4)); got != want {
		t.Fatalf("watch of history from %d:\n got %s\nwant %s", first, got, want)
	}
	wr := <-c.Watch(ctx, "/w/b", clientv3.WithRev(first), clientv3.WithPrevKV())
	if len(wr.Events) != 2 || wr.Events[1].PrevKv == nil || string(wr.Events[1].PrevKv.Value) != "1" {
		t.Fatalf("watch of /w/b with previous values: %s", describe(wr.Events))
	}
}

func testWatchCompacted(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	first, _ := writeSome(t, c)
	last := must(c.Put(ctx, "/w/c", ""))(t).Header.Revision
	must(c.Compact(ctx, last))(t)
	w := c.Watch(ctx, "/w/", clientv3.WithPrefix(), clientv3.WithRev(first))
	wr, ok := <-w
	if !ok || !errors.Is(wr.Err(), rpctypes.ErrCompacted) || wr.CompactRevision != last {
		t.Fatalf("watch from compacted revision %d: %v (compact revision %d), want %v at %d", first, wr.Err(), wr.CompactRevision, rpctypes.ErrCompacted, last)
	}
	for range w { // the channel closes
	}
	// From the compaction revision on, history is still there.
	if evs := collect(t, c.Watch(ctx, "/w/c", clientv3.WithRev(last)), 1); describe(evs) != fmt.Sprintf("PUT /w/c@%d;", last) {
		t.Fatalf("watch from the compaction revision: %s", describe(evs))
	}
}

func testWatchProgress(t *testing.T, b Backend) {
	c, ctx := client(t, b), ctxOf(t)
	first, _ := writeSome(t, c)
	now := must(c.Get(ctx, "/"))(t).Header.Revision
	w := c.Watch(ctx, "/w/", clientv3.WithPrefix(), clientv3.WithRev(first), clientv3.WithProgressNotify())
	n := 0
	for {
		if err := c.RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
		wr := <-w
		if wr.Err() != nil {
			t.Fatal(wr.Err())
		}
		n += len(wr.Events)
		if wr.IsProgressNotify() && wr.Header.Revision >= now {
			break
		}
	}
	if n != 4 {
		t.Fatalf("progress at revision %d after %d events, want all 4 first", now, n)
	}
}
