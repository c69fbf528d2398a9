//go:build linux

package scale

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/capacity"
	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/meta"
)

var (
	sizesFlag = flag.String("scale.sizes", "1000/250,2500/500,5000/1000,10000/1000",
		"the runs of TestScale: AGENTS/HOSTS pairs, comma-separated")
	runScale        = flag.Bool("scale.run", false, "run TestScale (make scale)")
	nsPerHostFlag   = flag.Int("scale.ns-per-host", 16, "namespaces per host")
	segmentsFlag    = flag.Int("scale.segments", 1, "segments allocated per volume")
	volumeFlag      = flag.Int64("scale.volume-tib", 0, "size of each volume in TiB (thin); 0: the volumes promise half the usable space")
	perClientFlag   = flag.Int("scale.agents-per-client", 100, "simulated nodes sharing one etcd client")
	steadyFlag      = flag.Duration("scale.steady", time.Minute, "how long the steady state is measured")
	openConcurrency = 16 // nodes mapping at once while the harness starts them
)

// result is one row of the table.
type result struct {
	sz                          size
	namespaces, segments        int
	setup                       time.Duration
	secs                        float64
	reads, txns, writes, renews float64 // per second, steady state
	cpu                         float64 // etcd's cores, steady state
	rss, db, dbInUse            float64
	keys, watchers, streams     float64
	openP50, openP99            time.Duration
	opens                       int
	openReads, openTxns         float64 // per unmap and map again, with the other nodes' steady load
	openWrites                  float64
	mapped                      bool          // every node mapped at the start
	storeOpenP99                time.Duration // the opens of the start, all nodes at once
	renewP50, renewP99          time.Duration
	renewals, renewErrs         int
	lost                        int // nodes whose lease ended during the steady state
	snapshot, decide            time.Duration
	snapshotReads               float64
	stormNodes, stormPaths      int
	stormWrites, stormFailed    int // records written, publications failed
	stormProposals              int // writes and compares that failed
	stormTime                   time.Duration
	create                      time.Duration // capacity-judged volume create
	createReads                 float64
	load                        string
	schedMap, schedSteady       time.Duration // the harness's scheduler latency p99 (schedLatency)
}

func TestScale(t *testing.T) {
	if !*runScale {
		t.Skip("make scale runs it (-scale.run); minutes to a quarter of an hour per size")
	}
	var rows []result
	for _, p := range strings.Split(*sizesFlag, ",") {
		a, h, ok := strings.Cut(strings.TrimSpace(p), "/")
		agents, err1 := strconv.Atoi(a)
		hosts, err2 := strconv.Atoi(h)
		if !ok || err1 != nil || err2 != nil || agents <= 0 || hosts <= 0 {
			t.Fatalf("-scale.sizes: %q is not AGENTS/HOSTS", p)
		}
		sz := size{agents: agents, hosts: hosts, nsPerHost: *nsPerHostFlag, segments: *segmentsFlag,
			volumeSize: *volumeFlag << 40, agentsPerClient: *perClientFlag}
		if sz.volumeSize == 0 {
			sz.volumeSize = halfUsable(sz)
		}
		t.Run(fmt.Sprintf("%d-agents-%d-hosts", agents, hosts), func(t *testing.T) {
			rows = append(rows, run(t, sz, *steadyFlag))
		})
		fmt.Print(table(rows))
	}
}

// halfUsable is a volume size (whole TiB) at which sz's volumes promise
// half the space 4+2 leaves of the namespaces: under the overcommit limit
// that capacity-judged creates enforce.
func halfUsable(sz size) int64 {
	raw := int64(sz.hosts*sz.nsPerHost) * nsBytes
	return max(1, raw/6*4/2/int64(sz.agents)>>40) << 40
}

// TestScaleSmoke runs the harness at a tiny size and checks the costs that
// must not grow with the cluster: a host's failure writes each changed
// path once however many nodes publish it, a capacity-judged volume
// create reads the namespaces' allocations in one request, not one each,
// and the controller reads the cluster in a few requests, not a few per
// volume.
func TestScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd and 40 nodes")
	}
	r := run(t, size{agents: 40, hosts: 24, nsPerHost: 16, segments: 4, volumeSize: 16 << 40, agentsPerClient: 10}, 2*time.Second)
	t.Log("\n" + table([]result{r}))
	// A lease may end on a machine too loaded to renew it in time (the
	// owner stops when it is no longer certain to hold it): counted, not
	// failed.
	if !r.mapped || r.opens != 10 || r.renewals == 0 {
		t.Errorf("every node mapped %v, mapped again %d, renewals %d (%d failed, %d leases lost): want all mapped and renewing",
			r.mapped, r.opens, r.renewals, r.renewErrs, r.lost)
	}
	if r.watchers < float64(2*(40-r.lost)) {
		t.Errorf("etcd has %v watchers, want at least 2 per node (owner key, volume record)", r.watchers)
	}
	if r.stormNodes < 2 || r.stormFailed != 0 {
		t.Fatalf("host failure: %d nodes published, %d failed: want several, none failing", r.stormNodes, r.stormFailed)
	}
	// Each changed path is written once; the others find it recorded
	// (those that read it before the write fail their compare, read again
	// and stop).
	if r.stormWrites != r.stormPaths {
		t.Errorf("host failure: %d nodes wrote %d records for %d changed paths; want one write per path",
			r.stormNodes, r.stormWrites, r.stormPaths)
	}
	// The controller reads the cluster in a few requests whatever its size:
	// one per prefix (hosts, namespaces, allocations, tasks, volumes, and
	// the volumes' owners, segments and stale marks), not one per volume or
	// namespace.
	if r.snapshotReads > 12 {
		t.Errorf("the controller's snapshot read etcd %v times for %d namespaces and %d volumes; want at most 12",
			r.snapshotReads, r.namespaces, r.sz.agents+1)
	}
	if r.createReads > 20 {
		t.Errorf("a capacity-judged volume create read etcd %v times over %d namespaces; want a handful of reads",
			r.createReads, r.namespaces)
	}
}

// run builds the cluster of sz, maps every node, measures the steady state
// for steady, then a host failure, the controller and a volume create.
func run(t *testing.T, sz size, steady time.Duration) result {
	ctx := context.Background()
	start := time.Now()
	etcd := startEtcd(t)
	w := &world{size: sz, stores: openStores(t, etcd.endpoint, sz)}
	w.paths = refusingPaths(t)
	build(t, ctx, w)
	r := result{sz: sz, namespaces: sz.hosts * sz.nsPerHost, segments: sz.agents * sz.segments}
	var opens, renewals latencies
	sched0 := readSched()
	nodes := make([]*node, sz.agents)
	for i := range nodes {
		nodes[i] = &node{i: i, store: w.store(i)}
	}
	t.Cleanup(func() { closeAll(nodes) })
	parallelN(t, sz.agents, openConcurrency, func(i int) error { return nodes[i].open(ctx, &opens, &renewals) })
	r.storeOpenP99, _ = opens.percentile(99)
	r.setup = time.Since(start)
	sched1 := readSched()
	r.schedMap = sched1.since(sched0, 99)
	t.Logf("%d nodes mapped after %v", sz.agents, r.setup.Round(time.Second))

	r.mapped = opens.err.Load() == 0
	time.Sleep(min(steady/4, 10*time.Second)) // renewals spread over their period
	renewals.reset()
	sched2 := readSched()
	measureSteady(t, ctx, etcd, steady, &r)
	r.schedSteady = readSched().since(sched2, 99)
	r.renewP50, r.renewals = renewals.percentile(50)
	r.renewP99, _ = renewals.percentile(99)
	r.renewErrs = int(renewals.err.Load())
	for _, n := range nodes {
		if n.m != nil && n.m.Owner.Context().Err() != nil {
			r.lost++
			t.Logf("node %d lost its lease: %v", n.i, context.Cause(n.m.Owner.Context()))
		}
	}
	if r.lost > 0 {
		// A lease lapses when its renewal goes unanswered for the TTL: the
		// harness's scheduler latency says whether the renewing goroutine
		// waited for a CPU that long (a loaded machine) or etcd answered late.
		t.Logf("%d leases lapsed; the harness's scheduler latency p99 was %v while mapping and %v steady (load %s): "+
			"a p99 near the lease TTL means the harness, not etcd, was starved", r.lost, r.schedMap, r.schedSteady, r.load)
	}
	measureOpens(t, ctx, etcd, nodes, min(sz.agents/4, 200), &r)

	measureStorm(t, ctx, etcd, w, &r)
	measureController(t, ctx, etcd, w, &r)
	measureCreate(t, ctx, etcd, w, &r)
	return r
}

// measureSteady samples etcd over the steady state: every node mapped,
// renewing its lease and watching.
func measureSteady(t *testing.T, ctx context.Context, etcd *etcdProc, steady time.Duration, r *result) {
	before, err := etcd.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(steady)
	after, err := etcd.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	secs := after.at.Sub(before.at).Seconds()
	rate := func(name string, labels ...string) float64 {
		return (after.sum(name, labels...) - before.sum(name, labels...)) / secs
	}
	r.secs = secs
	r.reads = rate("grpc_server_handled_total", `grpc_method="Range"`)
	r.txns = rate("grpc_server_handled_total", `grpc_method="Txn"`)
	r.writes = rate("etcd_server_proposals_committed_total")
	r.renews = rate("grpc_server_started_total", `grpc_method="LeaseKeepAlive"`)
	r.cpu = (after.cpu - before.cpu).Seconds() / secs
	r.rss = float64(after.rss)
	r.db = after.sum("etcd_mvcc_db_total_size_in_bytes")
	r.dbInUse = after.sum("etcd_mvcc_db_total_size_in_use_in_bytes")
	r.keys = after.sum("etcd_debugging_mvcc_keys_total")
	r.watchers = after.sum("etcd_debugging_mvcc_watcher_total")
	r.streams = after.sum("etcd_debugging_mvcc_watch_stream_total")
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
}

// measureOpens unmaps and maps again n nodes, two at a time, while the
// others stay mapped: the latency of a map's open under the steady load.
func measureOpens(t *testing.T, ctx context.Context, etcd *etcdProc, nodes []*node, n int, r *result) {
	var opens latencies
	before, err := etcd.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		after, err := etcd.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		delta := func(name string, labels ...string) float64 {
			return (after.sum(name, labels...) - before.sum(name, labels...)) / float64(n)
		}
		r.openReads = delta("grpc_server_handled_total", `grpc_method="Range"`)
		r.openTxns = delta("grpc_server_handled_total", `grpc_method="Txn"`)
		r.openWrites = delta("etcd_server_proposals_committed_total")
	}()
	parallelN(t, n, 2, func(k int) error {
		nd := nodes[k*len(nodes)/n]
		if err := nd.close(ctx); err != nil {
			t.Logf("unmap node %d: %v", nd.i, err) // a lost lease says so
		}
		return nd.open(ctx, &opens, &latencies{})
	})
	r.openP50, r.opens = opens.percentile(50)
	r.openP99, _ = opens.percentile(99)
}

// measureStorm fails the busiest host's paths on every node that uses
// them, then brings them back, and counts etcd's writes for the failure.
func measureStorm(t *testing.T, ctx context.Context, etcd *etcdProc, w *world, r *result) {
	host := busiestHost(w)
	before, err := etcd.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r.stormNodes, r.stormPaths, r.stormFailed = storm(ctx, w, host, meta.ANAInaccessible)
	r.stormTime = time.Since(start)
	after, err := etcd.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.stormWrites = int(after.sum("etcd_mvcc_put_total") - before.sum("etcd_mvcc_put_total"))
	r.stormProposals = int(after.sum("etcd_server_proposals_committed_total") - before.sum("etcd_server_proposals_committed_total"))
	storm(ctx, w, host, meta.ANAOptimized)
}

// measureController times the controller's read of the cluster
// (controller.LoadSnapshot, each tick) and its decision over it
// (decide.Decide), the best of three.
func measureController(t *testing.T, ctx context.Context, etcd *etcdProc, w *world, r *result) {
	for range 3 {
		before, err := etcd.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		snap, err := controller.LoadSnapshot(ctx, w.stores[0])
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		after, err := etcd.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if _, err := decide.Decide(snap.State, time.Now(), decide.Config{}); err != nil {
			t.Fatal(err)
		}
		decide := time.Since(start)
		if r.snapshot == 0 || took < r.snapshot {
			r.snapshot = took
			r.snapshotReads = after.sum("grpc_server_handled_total", `grpc_method="Range"`) - before.sum("grpc_server_handled_total", `grpc_method="Range"`) - 1
		}
		if r.decide == 0 || decide < r.decide {
			r.decide = decide
		}
	}
}

// measureCreate times one volume create judged against the cluster's space
// (capacity.CreateVolume: `volume create`, CSI CreateVolume) and counts
// its reads.
func measureCreate(t *testing.T, ctx context.Context, etcd *etcdProc, w *world, r *result) {
	before, err := etcd.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, _, err := capacity.CreateVolume(ctx, w.stores[0], volumeSpec("judged", w.size.volumeSize)); err != nil {
		t.Fatal(err)
	}
	r.create = time.Since(start)
	after, err := etcd.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.createReads = after.sum("grpc_server_handled_total", `grpc_method="Range"`) - before.sum("grpc_server_handled_total", `grpc_method="Range"`) - 1
}

// closeAll unmaps every node.
func closeAll(nodes []*node) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, n := range nodes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = n.close(context.Background())
		})
	}
	wg.Wait()
}

// parallelN is parallel with k workers.
func parallelN(t *testing.T, n, k int, fn func(i int) error) {
	t.Helper()
	var mu sync.Mutex
	next := 0
	var wg sync.WaitGroup
	var first error
	for range k {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					next = n
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// table renders the rows as a markdown table.
func table(rows []result) string {
	var b strings.Builder
	fmt.Fprintln(&b, "| nodes | hosts | namespaces | segments | keys | db (in use) | watchers | reads/s | txn/s | writes/s | keep-alives/s | etcd CPU | etcd RSS | map open p50 / p99 (reads, txns, writes per unmap+map) | renewal p50 / p99 (failed, leases lost) | controller read (reads) | decide | host failure: nodes, puts (txns) / paths, time | judged create (reads) | setup | load | harness sched p99 (map / steady) |")
	fmt.Fprintln(&b, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %.0f | %s (%s) | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f%% | %s | %v / %v (%.0f, %.0f, %.0f) | %v / %v (%d, %d) | %v (%.0f) | %v | %d, %d (%d) / %d, %v | %v (%.0f) | %v | %s | %v / %v |\n",
			r.sz.agents, r.sz.hosts, r.namespaces, r.segments, r.keys, mib(r.db), mib(r.dbInUse), r.watchers,
			r.reads, r.txns, r.writes, r.renews, 100*r.cpu, mib(r.rss), ms(r.openP50), ms(r.openP99), r.openReads, r.openTxns, r.openWrites, ms(r.renewP50), ms(r.renewP99), r.renewErrs, r.lost,
			ms(r.snapshot), r.snapshotReads, ms(r.decide), r.stormNodes, r.stormWrites, r.stormProposals, r.stormPaths, ms(r.stormTime),
			ms(r.create), r.createReads, r.setup.Round(time.Second), r.load, ms(r.schedMap), ms(r.schedSteady))
	}
	fmt.Fprintf(&b, "(harness: %d CPUs, Go %s)\n", runtime.NumCPU(), runtime.Version())
	return b.String()
}

func mib(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }

func ms(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}
