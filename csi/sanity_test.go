package csi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
)

// TestSanity runs the csi-sanity suite against the driver, an agent and a
// real in-process cluster, with real mounts (the FUSE + loop way).
func TestSanity(t *testing.T) {
	needNode(t)
	c := startCluster(t)
	a := c.startAgent(t, "node-sanity")
	p := c.startPlugin(t, "node-sanity", a.o.Socket, t.TempDir())
	if fi, err := os.Stat(p.sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the CSI socket: %v, mode %v, want 0600", err, fi.Mode())
	}
	dir := t.TempDir()
	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + p.sock
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestVolumeSize = 64 << 20
	cfg.TestVolumeExpandSize = 96 << 20
	cfg.TestVolumeParameters = map[string]string{"k": "2", "m": "1"}
	cfg.TestVolumeMutableParameters = map[string]string{"qosIOPS": "5000", "qosWriteBPS": "100MiB/s"}
	cfg.TestInvalidListVolumesStartingToken = "invalid-token"
	cfg.IdempotentCount = 3
	sanity.Test(t, cfg)
}
