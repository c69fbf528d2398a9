package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nvstripe/nvstripe/meta"
)

// TestVolumeLsJSONUnsettled: `volume ls -o json` gives each volume's
// unsettled blocks under the name `volume info -o json` does, zero for a
// volume without any, next to the record's fields.
func TestVolumeLsJSONUnsettled(t *testing.T) {
	a, s := adminFixture(t)
	ctx := context.Background()
	if _, err := s.CreateVolume(ctx, meta.VolumeSpec{Name: "w", Size: 16 << 20, Layout: meta.Layout{K: 4, M: 2, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	vm, err := s.VolumeMap(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.SetUnsettled(ctx, 0, [][3]int64{{0, 1, 2}, {1, 0, 0}}, true); err != nil {
		t.Fatal(err)
	}
	var info meta.VolumeInfo
	if err := json.Unmarshal([]byte(a.ok(`"unsettled"`, "volume", "info", "v", "-o", "json")), &info); err != nil || info.Unsettled.Blocks != 2 {
		t.Fatalf("volume info -o json: %+v (%v), want 2 unsettled blocks", info.Unsettled, err)
	}
	out := a.ok(`"unsettled"`, "volume", "ls", "-o", "json")
	var rows []struct {
		Name      string              `json:"name"`
		Size      int64               `json:"size"`
		Unsettled meta.UnsettledCount `json:"unsettled"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("volume ls -o json: %q: %v", out, err)
	}
	got := map[string]meta.UnsettledCount{}
	for _, r := range rows {
		if r.Size != 16<<20 {
			t.Errorf("volume ls -o json: %s has size %d, want the record's", r.Name, r.Size)
		}
		got[r.Name] = r.Unsettled
	}
	if len(rows) != 2 || got["v"] != info.Unsettled || got["w"] != (meta.UnsettledCount{}) {
		t.Fatalf("volume ls -o json: %q, want v with %+v (as volume info) and w with none", out, info.Unsettled)
	}
}
