package cli

import (
	"encoding/json"
	"testing"
)

// TestVolumeSettle: settle takes the unmapped volume, reads it whole and
// says what it reset (nothing on a healthy volume), in lines and as JSON;
// the volume is released after (a second settle takes it again).
// The blocks it resets are checked in volume (TestMoveCarriesUnsettledRows).
func TestVolumeSettle(t *testing.T) {
	cl := startMapCluster(t)
	cl.ok("volume v settled: 0 blocks reset", "volume", "settle", "v")
	out := cl.ok(`"reset"`, "volume", "settle", "v", "-o", "json")
	var got settled
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Volume != "v" || got.Reset == nil || len(got.Reset) != 0 {
		t.Errorf("settle -o json: %q (%v), want volume v with nothing reset", out, err)
	}
	cl.fails("not found", "volume", "settle", "nosuch")
}
