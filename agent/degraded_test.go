package agent

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/logging"
	"github.com/nvstripe/nvstripe/volume"
)

// TestDegradedWarning: a volume's degraded IO is counted and warned about
// once, not once per IO.
func TestDegradedWarning(t *testing.T) {
	var b bytes.Buffer
	warn := logging.WarnEvery(slog.New(slog.NewTextHandler(&b, nil)), time.Hour, "volume runs degraded")
	ev := newVolEvents("v", NewMetrics(), nil, warn)
	l := ev.listener()
	for i := 0; i < 3; i++ {
		l.Degraded(volume.DegradedInfo{Op: "read", Segment: 1, Missing: []string{"h1-n1"}})
	}
	if n := ev.degraded.Load(); n != 3 {
		t.Errorf("degraded count %d, want 3", n)
	}
	out := b.String()
	if strings.Count(out, "volume runs degraded") != 1 || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "volume=v") ||
		!strings.Contains(out, "h1-n1") {
		t.Errorf("warnings:\n%s", out)
	}
}

// TestHedgedReadsCounted: each hedged read the volume reports counts in
// nvstripe_agent_hedged_reads_total of its volume.
func TestHedgedReadsCounted(t *testing.T) {
	m := NewMetrics()
	l := newVolEvents("v", m, nil, func(string, ...any) {}).listener()
	for range 2 {
		l.Hedged(volume.HedgeInfo{Segment: 1, Slow: []string{"h1-n1"}, Extra: "h2-n1"})
	}
	if n := metricValue(t, gather(t, m), `nvstripe_agent_hedged_reads_total{volume="v"}`); n != 2 {
		t.Errorf("hedged reads %v, want 2", n)
	}
}
