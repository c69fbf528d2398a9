package agent

import (
	"context"
	"testing"

	"github.com/nvstripe/nvstripe/volume"
	"github.com/nvstripe/nvstripe/volume/layout"
)

// TestUnsettledMetric: unsettled_blocks counts the blocks the volume's
// owner knows unsettled, those its record names at open included (a new
// owner, after the agent restarted), and goes when the volume is unmapped.
func TestUnsettledMetric(t *testing.T) {
	ctx := context.Background()
	g := layout.Geometry{K: 2, M: 1, Chunk: 16 << 10, SlotSize: 512 << 10, Checksums: true}
	log := volume.NewMemUnsettledLog()
	rows := []volume.UnsettledRow{{Stripe: 0, Shard: 0, Row: 1}, {Stripe: 3, Shard: 1, Row: 0}}
	if err := log.SetUnsettled(ctx, volume.UnsettledSegment{Segment: 0, Blocks: rows}); err != nil {
		t.Fatal(err)
	}
	v, err := volume.New(volume.Options{Geometry: g, Size: g.SegmentData(), Devices: volume.DeviceMap{},
		Alloc: volume.NewMemAllocator(g.N(), map[string]int64{}), Unsettled: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.LoadUnsettled(ctx); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	m.setUnsettled("v", v)
	if got := gaugeValue(t, m, "nvstripe_agent_unsettled_blocks", "v"); got != 2 {
		t.Errorf("unsettled_blocks %v, want 2", got)
	}
	m.forget("v")
	if got := gaugeValue(t, m, "nvstripe_agent_unsettled_blocks", "v"); got != -1 {
		t.Errorf("unsettled_blocks %v after the volume was unmapped, want no series", got)
	}
}

// gaugeValue returns the value of gauge name for volume vol, -1 when it
// has no such series.
func gaugeValue(t *testing.T, m *Metrics, name, vol string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, p := range s.GetLabel() {
				if p.GetName() == "volume" && p.GetValue() == vol {
					return s.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
