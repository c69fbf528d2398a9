package agent

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/accept"
	"github.com/nvstripe/nvstripe/nbd"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
	"github.com/nvstripe/nvstripe/nbd/proto"
)

// TestNBDRefusalsCounted: a mapping's NBD listener serves
// nbd.DefaultMaxConnsPerIP connections from 127.0.0.1, closes the next one
// unanswered, and the agent's metrics count it under the volume and the
// reason.
func TestNBDRefusalsCounted(t *testing.T) {
	m := NewMetrics()
	dev, err := blockdev.NewMem(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Volume: "v", Via: ViaNBDListen, Where: "127.0.0.1:0"}
	f, err := startFrontend(context.Background(), spec, dev, &Options{Metrics: m, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	dial := func() (net.Conn, int) {
		nc, err := net.Dial("tcp", f.where())
		if err != nil {
			t.Fatal(err)
		}
		nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, _ := io.ReadFull(nc, make([]byte, proto.GreetingSize))
		return nc, n
	}
	for i := range nbd.DefaultMaxConnsPerIP { // past the handshake: MaxHandshakesPerIP is lower
		c, err := nbdtest.Dial(t.Context(), "tcp", f.where(), "")
		if err != nil {
			t.Fatalf("connection %d within the cap: %v", i+1, err)
		}
		defer c.Close()
	}
	nc, n := dial()
	nc.Close()
	if n != 0 {
		t.Fatalf("the connection beyond the per-IP cap read %d bytes, want it closed unanswered", n)
	}
	if got := refusedCount(t, m, "v", accept.RefusedPerIP); got != 1 {
		t.Fatalf("nbd_refused_total{volume=v,reason=%s} = %v, want 1", accept.RefusedPerIP, got)
	}
}

// refusedCount reads nvstripe_agent_nbd_refused_total for volume and
// reason from m's registry (0 when the series does not exist).
func refusedCount(t *testing.T, m *Metrics, volume, reason string) float64 {
	t.Helper()
	return counters(t, m, "nvstripe_agent_nbd_refused_total", "volume", "reason")[volume+"/"+reason]
}
