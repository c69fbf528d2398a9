package meta

import (
	"bytes"
	"os/exec"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestExternalEtcd runs the core flows against Debian's etcd-server (3.4), a
// separate process on free loopback ports, as a production cluster would be.
func TestExternalEtcd(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd binary not found (apt-get install etcd-server): skipping the external etcd test")
	}
	client, peer := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "--name", "ext", "--data-dir", t.TempDir(),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "ext=http://"+peer, "--heartbeat-interval", "10", "--election-timeout", "100",
		"--log-outputs", "stderr", "--logger", "zap", "--log-level", "error")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("etcd log:\n%s", logs.String())
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ctx := testCtx(t)
	var s *Store
	for deadline := time.Now().Add(30 * time.Second); ; {
		if s, err = Open(ctx, Config{Endpoints: []string{client}, DialTimeout: time.Second}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("external etcd never answered: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer s.Close()
	populate(t, s, 3, 1, 8)
	vm := addVolume(t, s, "vol", 2, 1, 4)
	o := takeOwner(t, ctx, s, "vol", OwnerOptions{Holder: "node"})
	fenced, _ := s.VolumeMap(ctx, "vol", o)
	for seg := range int64(4) {
		if _, err := fenced.Allocate(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}
	if err := fenced.MarkDirty(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVolume(ctx, "vol"); err == nil {
		t.Fatal("deleted a mapped volume")
	}
	_ = o.Release(ctx)
	if err := vm.Free(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if used := checkAllocations(t, s); used != 9 {
		t.Fatalf("%d slots used, want 9", used)
	}
}

// freeAddr is testutil.FreeAddr under this package's old name.
var freeAddr = testutil.FreeAddr
