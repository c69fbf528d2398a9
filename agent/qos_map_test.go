package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/agent/top"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// setIOPS gives volume v an IOPS limit.
func setIOPS(t *testing.T, s *meta.Store, iops int64) {
	t.Helper()
	if _, err := s.SetVolumeQoS(context.Background(), "v", meta.QoSChange{IOPS: &iops}); err != nil {
		t.Fatal(err)
	}
}

// TestForegroundMetricsAndTop: a foreground map started with a metrics
// listener names it in its Status, MetricsEndpoints finds it through the
// map's socket, and top's reading of it over an interval of IO shows the
// volume's reads, a latency, the requests its QoS limit (applied by the
// foreground map as by the agent) delayed, and the limit.
func TestForegroundMetricsAndTop(t *testing.T) {
	e := newAgentEnv(t)
	setIOPS(t, e.store, 200)
	ctx := context.Background()
	dir := t.TempDir()
	noAgent := filepath.Join(dir, "agent.sock")
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	url, done := startServing(t, func(ready func(string)) error {
		return ServeForeground(fctx, Spec{Volume: "v", Via: ViaNBDListen, Where: "127.0.0.1:0"}, ForegroundOptions{Agent: e.options(t, ""),
			ListDir: dir, MetricsAddr: "127.0.0.1:0", Serving: ready})
	})
	defer func() { stop(); <-done }()
	urls := MetricsEndpoints(ctx, noAgent, dir, func(w string) { t.Errorf("endpoints: %s", w) })
	if len(urls) != 1 || !strings.HasPrefix(urls[0], "http://127.0.0.1:") {
		t.Fatalf("metrics endpoints found: %q, want the map's", urls)
	}
	c, err := nbdtest.Dial(ctx, "tcp", strings.TrimSuffix(strings.TrimPrefix(url, "nbd://"), "/v"), "v")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	load := startLoad(t, c, 8)
	var rows []top.Row
	err = top.Watch(ctx, urls, time.Second, 1, func(w string) { t.Errorf("top: %s", w) }, func(r []top.Row) error { rows = r; return nil })
	load.end()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("top rows: %+v, want one for v", rows)
	}
	r := rows[0]
	t.Logf("top: %+v", r)
	if r.Volume != "v" || r.ReadIOPS <= 0 || r.P99 <= 0 || r.P9999 < r.P99 || r.QoSDelayed <= 0 || r.QoSWait <= 0 || r.Limits["iops"] != 200 {
		t.Fatalf("top row %+v: want reads, a latency, delayed requests and the limit 200", r)
	}
	// The upper bound is exact: the bucket's 200 (one second's burst) plus
	// 200 a second over the whole run, counting from the run's start.
	if r.ReadIOPS > 400*1.1 {
		t.Fatalf("top shows %.0f reads a second under a limit of 200 a second with a 200 burst", r.ReadIOPS)
	}
}

// TestQoSLimitsFUSE: a FUSE mapping applies its volume's QoS: reads of
// the file past the burst wait for their turn (counted as delayed).
func TestQoSLimitsFUSE(t *testing.T) {
	testutil.NeedFUSE(t)
	e := newAgentEnv(t)
	setIOPS(t, e.store, 100)
	a := e.newAgent(t, e.options(t, ""))
	m, err := a.Map(context.Background(), Spec{Volume: "v", Via: ViaFUSE, Where: filepath.Join(t.TempDir(), "mnt")})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(m.Url)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for i := range 150 { // the burst of 100, then 50 that wait
		if _, err := f.ReadAt(buf, int64(i)*4096); err != nil {
			t.Fatal(err)
		}
	}
	if d := qosDelayed(t, a.metrics); d == 0 {
		t.Fatal("150 reads through FUSE under a limit of 100 a second with a burst of 100: none delayed")
	}
}
