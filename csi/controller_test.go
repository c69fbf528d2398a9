package csi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/nvstripe/nvstripe/capacity"
	"github.com/nvstripe/nvstripe/meta"
)

// TestCreateVolumeParameters checks the StorageClass parameters against
// the volume records they make, repeated creates, and GetCapacity against
// df's numbers. Controller only: no agent, no mounts.
func TestCreateVolumeParameters(t *testing.T) {
	c := startMemCluster(t)
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

// TestQoSParameters checks QoS through the driver's gRPC socket: the
// StorageClass's qos* parameters and the mutable parameters of a
// VolumeAttributesClass set the limits a volume is created with, bad
// values are InvalidArgument and create nothing, and
// ControllerModifyVolume changes only the limits it is given.
func TestQoSParameters(t *testing.T) {
	c := startMemCluster(t)
	d, err := New(Options{Store: c.store, Controller: true})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := serveController(t, d)
	ctx := context.Background()
	create := func(name string, params, mutable map[string]string) error {
		_, err := ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: name, Parameters: params, MutableParameters: mutable,
			CapacityRange:      &csipb.CapacityRange{RequiredBytes: 8 << 20},
			VolumeCapabilities: []*csipb.VolumeCapability{capability(true, rwo)}})
		return err
	}
	qosOf := func(name string) meta.QoS {
		t.Helper()
		rec, err := c.store.Volume(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return rec.QoS
	}

	caps, err := ctrl.ControllerGetCapabilities(ctx, &csipb.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(caps.GetCapabilities(), func(c *csipb.ControllerServiceCapability) bool {
		return c.GetRpc().GetType() == csipb.ControllerServiceCapability_RPC_MODIFY_VOLUME
	}) {
		t.Errorf("MODIFY_VOLUME not advertised: %v", caps)
	}

	class := map[string]string{"k": "2", "m": "1", "qosIOPS": "1000", "qosBPS": "200MiB/s", "qosReadIOPS": "800", "qosBurst": "2s"}
	if err := create("limited", class, map[string]string{"qosWriteIOPS": "300"}); err != nil {
		t.Fatal(err)
	}
	want := meta.QoS{IOPS: 1000, ReadIOPS: 800, WriteIOPS: 300, BPS: 200 << 20, BurstMS: 2000}
	if q := qosOf("limited"); q != want {
		t.Errorf("created with %+v, want %+v", q, want)
	}

	for i, tc := range []struct{ params, mutable map[string]string }{
		{map[string]string{"qosBPS": "fast"}, nil},
		{map[string]string{"qosIOPS": "-1"}, nil},
		{map[string]string{"qosIOPS": "1.5"}, nil},
		{map[string]string{"qosBurst": "2h"}, nil},
		{map[string]string{"qosBurst": "1500us"}, nil},
		{map[string]string{"qosiops": "100"}, nil},
		{nil, map[string]string{"qosWriteBPS": "x"}},
		{nil, map[string]string{"k": "3"}},
		{nil, map[string]string{"qosBurst": "61s"}},
	} {
		name := fmt.Sprintf("bad%d", i)
		params := map[string]string{"k": "2", "m": "1"}
		maps.Copy(params, tc.params)
		err := create(name, params, tc.mutable)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v %v: %v, want InvalidArgument", tc.params, tc.mutable, err)
		}
		if _, err := c.store.Volume(ctx, name); !errors.Is(err, meta.ErrNotFound) {
			t.Errorf("refused create %v %v left a volume: %v", tc.params, tc.mutable, err)
		}
	}

	modify := func(name string, mutable map[string]string) error {
		_, err := ctrl.ControllerModifyVolume(ctx, &csipb.ControllerModifyVolumeRequest{VolumeId: name, MutableParameters: mutable})
		return err
	}
	if err := modify("limited", map[string]string{"qosIOPS": "0", "qosReadBPS": "1GiB/s"}); err != nil {
		t.Fatal(err)
	}
	want.IOPS, want.ReadBPS = 0, 1<<30
	if q := qosOf("limited"); q != want {
		t.Errorf("modified to %+v, want %+v", q, want)
	}
	for _, tc := range []struct {
		name    string
		mutable map[string]string
		code    codes.Code
	}{
		{"limited", map[string]string{"qosBPS": "x"}, codes.InvalidArgument},
		{"limited", map[string]string{"qosIOPS": "5", "qosBurst": "2m"}, codes.InvalidArgument},
		{"limited", map[string]string{"m": "2"}, codes.InvalidArgument},
		{"", map[string]string{"qosIOPS": "5"}, codes.InvalidArgument},
		{"missing", map[string]string{"qosIOPS": "5"}, codes.NotFound},
	} {
		if err := modify(tc.name, tc.mutable); status.Code(err) != tc.code {
			t.Errorf("modify %q %v: %v, want %s", tc.name, tc.mutable, err, tc.code)
		}
	}
	if q := qosOf("limited"); q != want {
		t.Errorf("refused modifies changed the limits to %+v, want %+v", q, want)
	}
	if err := create("limited", class, nil); err != nil {
		t.Errorf("the same create after a modify: %v", err)
	}
}

// serveController serves d on a unix socket and returns a client of its
// controller service.
func serveController(t *testing.T, d *Driver) csipb.ControllerClient {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- d.Serve(ctx, "unix://"+sock, func(string) { close(ready) }) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serving: %v", err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return csipb.NewControllerClient(conn)
}
