package csi

import (
	"context"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nvstripe/nvstripe/capacity"
	"github.com/nvstripe/nvstripe/meta"
)

// TestCreateVolumeParameters checks the StorageClass parameters against
// the volume records they make, repeated creates, and GetCapacity against
// df's numbers. Controller only: no agent, no mounts.
func TestCreateVolumeParameters(t *testing.T) {
	c := startCluster(t)
	d, err := New(Options{Store: c.store, Controller: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create := func(name string, size int64, params map[string]string) (*csipb.Volume, error) {
		rep, err := d.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: name, Parameters: params,
			CapacityRange:      &csipb.CapacityRange{RequiredBytes: size},
			VolumeCapabilities: []*csipb.VolumeCapability{capability(false, rwo)}})
		return rep.GetVolume(), err
	}

	v, err := create("plain", 10<<20+1, map[string]string{"k": "2", "m": "1", "checksums": "false", "csi.storage.k8s.io/fstype": "xfs"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.store.Volume(ctx, v.GetVolumeId())
	if err != nil {
		t.Fatal(err)
	}
	if l := rec.Layout; rec.Size != 10<<20+4096 || l.K != 2 || l.M != 1 || l.Checksum != "" || l.WriteLog != "" {
		t.Errorf("checksums=false: size %d layout %+v", rec.Size, l)
	}
	if v.GetAccessibleTopology()[0].GetSegments()[TopologyKey] == "" {
		t.Errorf("no topology: %v", v)
	}
	v, err = create("checked", 8<<20, map[string]string{"k": "2", "m": "1", "failureDomain": "host"})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err = c.store.Volume(ctx, v.GetVolumeId()); err != nil || rec.Layout.Checksum != meta.ChecksumCRC32C || rec.Layout.WriteLog != meta.WriteLogPPL {
		t.Errorf("defaults: %v %+v", err, rec)
	}
	if _, err := create("checked", 8<<20, map[string]string{"k": "2", "m": "1"}); err != nil {
		t.Errorf("the same create again: %v", err)
	}
	long := strings.Repeat("pvc-", 30)
	if v, err = create(long, 8<<20, map[string]string{"k": "2", "m": "1"}); err != nil || v.GetVolumeId() != volumeID(long) || len(v.GetVolumeId()) > 63 {
		t.Errorf("a 120-character name: %v %v", v, err)
	}

	for _, tc := range []struct {
		name   string
		params map[string]string
		code   codes.Code
	}{
		{"checked", map[string]string{"k": "2", "m": "1", "checksums": "false"}, codes.AlreadyExists},
		{"plain", map[string]string{"k": "1", "m": "1", "checksums": "false"}, codes.AlreadyExists},
		{"x1", map[string]string{"k": "2", "m": "1", "replicas": "3"}, codes.InvalidArgument},
		{"x2", map[string]string{"k": "two"}, codes.InvalidArgument},
		{"x3", map[string]string{"k": "2", "m": "1", "failureDomain": "rack"}, codes.InvalidArgument},
		{"x4", map[string]string{"k": "2", "m": "1", "checksums": "false", "writeLog": "true"}, codes.InvalidArgument},
		{"x5", map[string]string{"k": "4", "m": "2"}, codes.ResourceExhausted}, // 6 shards, 3 failure domains
	} {
		if _, err := create(tc.name, 8<<20, tc.params); status.Code(err) != tc.code {
			t.Errorf("%s %v: %v, want %s", tc.name, tc.params, err, tc.code)
		}
	}
	for _, name := range []string{"x1", "x2", "x3", "x4", "x5"} {
		if _, err := c.store.Volume(ctx, volumeID(name)); err == nil {
			t.Errorf("refused create of %s left a volume", name)
		}
	}

	cap, err := d.GetCapacity(ctx, &csipb.GetCapacityRequest{Parameters: map[string]string{"k": "2", "m": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	in, limit, err := capacity.Load(ctx, c.store)
	if err != nil {
		t.Fatal(err)
	}
	r, err := capacity.Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := (int64(limit*float64(r.Usable)) - r.Promised) / 3 * 2; cap.GetAvailableCapacity() != want || want <= 0 {
		t.Errorf("GetCapacity %d, want %d (df: usable %d promised %d limit %g)", cap.GetAvailableCapacity(), want, r.Usable, r.Promised, limit)
	}
}
