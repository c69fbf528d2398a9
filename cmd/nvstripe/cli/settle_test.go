package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/meta"
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

// TestVolumeSettleClearsRecord: the unsettled blocks a volume's record
// names (a move carried them over blank) are counted by volume info, with
// the command that settles them, and `volume settle` clears the record.
func TestVolumeSettleClearsRecord(t *testing.T) {
	cl := startMapCluster(t)
	ctx := t.Context()
	s, err := meta.Open(ctx, meta.Config{Endpoints: []string{cl.etcd}, Cluster: cl.cluster})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vm, err := s.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.SetUnsettled(ctx, 0, [][3]int64{{0, 1, 2}, {1, 0, 0}}, false); err != nil {
		t.Fatal(err)
	}
	cl.ok("unsettled 2 blocks (4 KiB each) read as corrupt", "volume", "info", "v")
	cl.ok("volume v: unsettled 2 blocks", "volume", "ls")
	cl.ok("nvstripe volume settle v", "volume", "info", "v")
	var info meta.VolumeInfo
	out := cl.ok(`"unsettled"`, "volume", "info", "v", "-o", "json")
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Unsettled.Blocks != 2 {
		t.Errorf("volume info -o json: %q (%v), want 2 unsettled blocks", out, err)
	}
	cl.ok("volume v settled", "volume", "settle", "v")
	if got, err := vm.Unsettled(ctx); err != nil || len(got) != 0 {
		t.Errorf("after settle the volume's record lists %v (%v)", got, err)
	}
	if out = cl.ok("volume v", "volume", "info", "v"); strings.Contains(out, "unsettled") {
		t.Errorf("volume info after settle: %q", out)
	}
	if out = cl.ok("v", "volume", "ls"); strings.Contains(out, "unsettled") {
		t.Errorf("volume ls after settle: %q", out)
	}
}
