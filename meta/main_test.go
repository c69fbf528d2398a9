package meta

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nvstripe/nvstripe/meta/etcdembed"
	"github.com/nvstripe/nvstripe/meta/memetcd"
	"github.com/nvstripe/nvstripe/meta/metatest"
)

// One etcd serves every test of the package; each test works in a
// cluster (key prefix) of its own. It is an embedded etcd, or with
// -meta.mem an in-memory one (meta/memetcd, on the real clock): the
// package's tests then check that the Store works alike over both. Tests
// of what only a real etcd does (dialling, TLS, authentication, a cut
// connection) skip there.
var (
	memFlag      = flag.Bool("meta.mem", false, "run the tests on an in-memory etcd (meta/memetcd) instead of an embedded one")
	shared       *testEtcd
	testClusterN atomic.Int64
)

// testEndpoints are the shared embedded etcd's endpoints (none with
// -meta.mem).
var testEndpoints []string

func TestMain(m *testing.M) {
	flag.Parse()
	if *memFlag {
		srv := memetcd.New(memetcd.Options{})
		shared = &testEtcd{mem: srv}
		code := m.Run()
		srv.Close()
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "meta-test-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err := etcdembed.Start(context.Background(), etcdembed.Options{Dir: dir, Fast: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testEndpoints = srv.Endpoints()
	shared = &testEtcd{eps: testEndpoints}
	code := m.Run()
	_ = srv.Close()
	_ = srv.Close() // Close is idempotent
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// testEtcd is an etcd the tests use: embedded (eps) or in memory (mem).
type testEtcd struct {
	eps []string
	mem *memetcd.Server
}

// needEtcd skips a test of what only a real etcd does.
func needEtcd(t testing.TB) {
	t.Helper()
	if *memFlag {
		t.Skip("needs a real etcd (runs without -meta.mem)")
	}
}

// open opens a Store on cluster of e, closed when t ends.
func (e *testEtcd) open(t testing.TB, cluster string) *Store {
	t.Helper()
	var s *Store
	var err error
	if e.mem != nil {
		s, err = OpenClient(e.mem.Client(), Config{Cluster: cluster})
	} else {
		s, err = Open(testCtx(t), Config{Endpoints: e.eps, Cluster: cluster})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// client returns a plain etcd client of e, closed when t ends.
func (e *testEtcd) client(t testing.TB) *clientv3.Client {
	t.Helper()
	var cli *clientv3.Client
	if e.mem != nil {
		cli = e.mem.Client()
	} else {
		var err error
		cli, err = clientv3.New(clientv3.Config{Endpoints: e.eps, DialTimeout: 5 * time.Second, Logger: nopLogger()})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// compact compacts e's history up to a new revision, which it returns.
func (e *testEtcd) compact(t testing.TB) int64 {
	t.Helper()
	return metatest.CompactClient(t, e.client(t))
}

// testCtx is a context bounded well above anything a test needs, so that a
// bug fails the test instead of hanging it.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newStore opens a Store on a cluster name unique to this test.
func newStore(t testing.TB) *Store {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", testClusterN.Add(1), strings.NewReplacer("/", "-", "#", "-").Replace(t.Name()))
	if len(name) > 63 {
		name = name[:63]
	}
	return shared.open(t, name)
}

// privateStore opens a Store on an etcd of its own, which it returns, for
// tests that compact (compaction is etcd-wide: not on the shared one).
func privateStore(t testing.TB) (*Store, *testEtcd) {
	t.Helper()
	e := &testEtcd{}
	if *memFlag {
		e.mem = memetcd.New(memetcd.Options{})
		t.Cleanup(e.mem.Close)
	} else {
		e.eps = metatest.Start(t)
	}
	return e.open(t, "c"), e
}

// rawClient is a plain etcd client for tampering with keys.
func rawClient(t testing.TB) *clientv3.Client {
	t.Helper()
	return shared.client(t)
}

const testSlot = 64 << 10 // MinSlotSize keeps the test clusters tiny

// setup initializes a cluster of hosts h0..h(hosts-1), each with per
// namespaces of slots usable slots (+1 for the label).
func setup(t testing.TB, hosts, per int, slots int64) *Store {
	t.Helper()
	s := newStore(t)
	populate(t, s, hosts, per, slots)
	return s
}

// populate initializes s's cluster as setup does.
func populate(t testing.TB, s *Store, hosts, per int, slots int64) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := s.InitCluster(ctx, InitOptions{SlotSize: testSlot}); err != nil {
		t.Fatal(err)
	}
	for h := range hosts {
		host := fmt.Sprintf("h%d", h)
		if _, err := s.AddHost(ctx, host, map[string]string{"rack": fmt.Sprintf("r%d", h%2)}); err != nil {
			t.Fatal(err)
		}
		for n := range per {
			_, err := s.AddNamespace(ctx, NamespaceSpec{Host: host, NQN: "nqn.2024-01.io.nvstripe:" + host, NSID: uint32(n + 1),
				Size: (slots + 1) * testSlot, Paths: []PathRecord{{Addr: fmt.Sprintf("tcp://127.0.0.1:%d", 4420+h)}}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// takeOwner acquires volume vol as o says, or fails t.
func takeOwner(t testing.TB, ctx context.Context, s *Store, vol string, o OwnerOptions) *Owner {
	t.Helper()
	owner, err := s.Acquire(ctx, vol, o)
	if err != nil {
		t.Fatal(err)
	}
	return owner
}

// revokeOwner revokes the lease behind vol's read-write owner key, as if
// etcd had expired it, and waits until o (that owner) sees it lost.
func revokeOwner(t *testing.T, ctx context.Context, s *Store, vol string, o *Owner) {
	t.Helper()
	cli := rawClient(t)
	resp, err := cli.Get(ctx, s.keys.ownerRW(vol))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("owner key: %v", err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	waitDone(t, o.Context(), "after revoke")
}

// allocateFree allocates segment seg of vm (if it is not yet) and frees
// it, or fails t.
func allocateFree(t *testing.T, ctx context.Context, vm *VolumeMap, seg int64) {
	t.Helper()
	if _, err := vm.Allocate(ctx, seg); err != nil {
		t.Fatal(err)
	}
	if err := vm.Free(ctx, seg); err != nil {
		t.Fatal(err)
	}
}

// addVolume creates a volume of segs segments of layout k+m.
func addVolume(t testing.TB, s *Store, name string, k, m int, segs int64) *VolumeMap {
	t.Helper()
	ctx := testCtx(t)
	_, err := s.CreateVolume(ctx, VolumeSpec{Name: name, Size: segs * int64(k) * testSlot, Layout: Layout{K: k, M: m, Chunk: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := s.VolumeMap(ctx, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}
