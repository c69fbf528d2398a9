package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta/metatest"
)

// TestHostTraddrFlag: map, agent and controller refuse a --host-traddr
// that is not an IP address or not one of this host's with an error naming
// it, before they serve anything (each would run until interrupted if the
// flag were ignored: the test's deadline ends them and fails).
func TestHostTraddrFlag(t *testing.T) {
	ep := metatest.Start(t)[0]
	dir := t.TempDir()
	if _, _, err := run(t, "cluster", "init", "--etcd", ep, "--cluster", "traddr"); err != nil {
		t.Fatal(err)
	}
	const nqn = "nqn.2026-01.io.example:traddr-test"
	cmds := map[string][]string{
		"map":        {"map", "v", "--nbd-listen", "127.0.0.1:0", "--host-nqn", nqn, "--map-sockets", ""},
		"agent":      {"agent", "--socket", filepath.Join(dir, "agent.sock"), "--state-dir", filepath.Join(dir, "state"), "--metrics", "", "--host-nqn", nqn},
		"controller": {"controller", "--api", "", "--host-nqn", nqn},
	}
	bad := map[string]string{"eth0": "not an IP address", "192.0.2.7": "not an address of this host"} // TEST-NET-1: on no interface
	for name, args := range cmds {
		for addr, why := range bad {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var out, errb bytes.Buffer
			err := Run(ctx, append(args, "--host-traddr", addr, "--etcd", ep, "--cluster", "traddr"), &out, &errb)
			cancel()
			if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), why) {
				t.Errorf("%s --host-traddr %s: %v (output %q), want an error naming it: %q", name, addr, err, out.String(), why)
			}
		}
	}
}
