package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

const (
	testNQN  = "nqn.2026-12.io.nvstripe:metrics"
	hostA    = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000a"
	hostB    = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000b"
	stranger = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000ff"
)

// scrape is testutil.Metrics of url, failing t on an error.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	m, err := testutil.Metrics(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func nsMetric(name, op string) string {
	l := `namespace="d0",nqn="` + testNQN + `",nsid="1"` // labels sort by name
	if op != "" {
		l += `,op="` + op + `"`
	}
	return "nvstripe_target_" + name + "{" + l + "}"
}

// hostMetric names a per-host sample of namespace 1.
func hostMetric(name, host, op string) string {
	return "nvstripe_target_" + name + `{host="` + host + `",namespace="d0",nqn="` + testNQN + `",nsid="1",op="` + op + `"}`
}

func open(t *testing.T, addr, host string, id byte) (*initiator.Device, error) {
	d, err := initiator.Open(context.Background(), initiator.Options{HostNQN: host, SubsysNQN: testNQN, Paths: []string{addr},
		HostID: [16]byte{15: id}, IOQueues: 1, ConnectTimeout: 2 * time.Second, ControllerLossTimeout: time.Second, IOTimeout: 5 * time.Second})
	if err == nil {
		t.Cleanup(func() { d.Close() })
	}
	return d, err
}

// TestScrapeMovesWithIO: the metrics served for a real target count the
// bytes and commands a real initiator sends, its live connections, a host
// the target refuses and a write refused by a reservation.
func TestScrapeMovesWithIO(t *testing.T) {
	mem, err := blockdev.NewMem(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := target.New(target.Config{
		Listeners: []target.ListenerConfig{{Address: "127.0.0.1:0"}},
		Subsystems: []target.SubsystemConfig{{NQN: testNQN, AllowedHosts: []string{hostA, hostB},
			Namespaces: []target.NamespaceConfig{{NSID: 1, Name: "d0", Device: mem}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := tgt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	addr, stop, err := Serve("127.0.0.1:0", tgt)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	url := "http://" + addr + "/metrics"

	before := scrape(t, url)
	if before["nvstripe_target_connections"] != 0 || before[nsMetric("io_bytes_total", "write")] != 0 {
		t.Fatalf("idle target: connections %v, written %v", before["nvstripe_target_connections"], before[nsMetric("io_bytes_total", "write")])
	}
	a, err := open(t, tgt.Addr(0), hostA, 1)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8192)
	if err := a.WriteAt(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.ReadAt(ctx, buf[:4096], 4096); err != nil {
		t.Fatal(err)
	}
	mid := scrape(t, url)
	for name, want := range map[string]float64{
		nsMetric("io_bytes_total", "write"): 8192, nsMetric("io_bytes_total", "read"): 4096,
		nsMetric("io_ops_total", "write"): 1, nsMetric("io_ops_total", "read"): 1,
		nsMetric("io_latency_seconds_count", "write"): 1, nsMetric("io_latency_seconds_count", "read"): 1,
		nsMetric("io_latency_seconds_bucket", "read")[:len(nsMetric("io_latency_seconds_bucket", "read"))-1] + `,le="+Inf"}`: 1,
		hostMetric("host_io_bytes_total", hostA, "write"):                                                                    8192, hostMetric("host_io_bytes_total", hostA, "read"): 4096,
		hostMetric("host_io_ops_total", hostA, "write"): 1, hostMetric("host_io_latency_seconds_count", hostA, "read"): 1,
	} {
		if got := mid[name] - before[name]; got != want {
			t.Errorf("%s moved by %v, want %v", name, got, want)
		}
	}
	if mid["nvstripe_target_connections"] < 2 || mid["nvstripe_target_queues"] < 2 || mid["nvstripe_target_controllers"] != 1 {
		t.Errorf("with one host (admin + IO queue): connections %v queues %v controllers %v", mid["nvstripe_target_connections"],
			mid["nvstripe_target_queues"], mid["nvstripe_target_controllers"])
	}

	if _, err := open(t, tgt.Addr(0), stranger, 3); err == nil {
		t.Fatal("a host not allowed connected")
	}
	b, err := open(t, tgt.Addr(0), hostB, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.TakeOver(ctx, 100, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAt(ctx, buf[:4096], 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("write by the host without the reservation: %v, want ErrFenced", err)
	}
	after := scrape(t, url)
	refused := `nvstripe_target_refused_connections_total{reason="host_not_allowed"}`
	if got := after[refused] - mid[refused]; got != 1 {
		t.Errorf("%s moved by %v, want 1", refused, got)
	}
	if got := after[nsMetric("reservation_conflicts_total", "")] - mid[nsMetric("reservation_conflicts_total", "")]; got < 1 {
		t.Errorf("reservation conflicts moved by %v, want at least 1", got)
	}
	if got := after[hostMetric("host_io_ops_total", hostB, "write")]; got < 1 {
		t.Errorf("host B's write ops %v, want at least 1 (its refused write)", got)
	}
	if got := after[hostMetric("host_io_bytes_total", hostB, "write")]; got != 0 {
		t.Errorf("host B's bytes written %v, want 0 (refused)", got)
	}
	if got, ok := after[nsMetric("io_queued", "")]; !ok || got != 0 {
		t.Errorf("io_queued %v (present %v), want 0", got, ok)
	}
	if after[nsMetric("io_errors_total", "")] != 0 {
		t.Errorf("io errors %v, want 0 (a conflict is not an error)", after[nsMetric("io_errors_total", "")])
	}
}
