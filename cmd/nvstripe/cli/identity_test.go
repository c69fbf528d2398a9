package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// TestMain keeps the in-process commands off /etc/nvme and /etc/nvstripe:
// the node identity lives in a temporary directory.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nvstripe-identity-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(hostIdentityEnv, dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestNodeIdentity: the node's host NQN is made once and is what 'ns add'
// connects as: a target allowing only it admits the node; --host-nqn
// overrides it (and is refused there).
func TestNodeIdentity(t *testing.T) {
	t.Setenv(hostIdentityEnv, t.TempDir())
	first, _, err := run(t, "host-identity")
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := run(t, "host-identity")
	if err != nil || again != first {
		t.Fatalf("second host-identity: %q %v, first %q", again, err, first)
	}
	var nqn, id string
	if _, err := fmt.Sscanf(first, "hostnqn %s\nhostid %s\n", &nqn, &id); err != nil || !strings.HasSuffix(nqn, id) {
		t.Fatalf("host-identity printed %q (%v)", first, err)
	}

	d, err := blockdev.NewMem(8<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	const sub = "nqn.2024-01.io.test:ident"
	tg, err := target.New(target.Config{Listeners: []target.ListenerConfig{{Address: "127.0.0.1:0"}},
		Subsystems: []target.SubsystemConfig{{NQN: sub, AllowedHosts: []string{nqn}, Namespaces: []target.NamespaceConfig{{NSID: 1, Device: d}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	cl := initCluster(t, "default")
	cl.ok("added", "host", "add", "h0")
	path := "tcp://" + tg.Addrs()[0]
	cl.fails("host", "ns", "add", "--host", "h0", "--nqn", sub, "--nsid", "1", "--path", path, "--host-nqn", "nqn.2026-01.io.example:stranger")
	cl.fails("--host-nqn", "ns", "add", "--host", "h0", "--nqn", sub, "--nsid", "1", "--path", path, "--host-nqn", "not an nqn")
	cl.ok("added", "ns", "add", "--host", "h0", "--nqn", sub, "--nsid", "1", "--path", path)
}
