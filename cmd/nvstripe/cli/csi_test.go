package cli

import (
	"strings"
	"testing"
)

// TestCSITLSKeyFile: `nvstripe csi --tls-key-file` is a usage error that
// says the key goes to the agent, which opens the NVMe/TCP connections of
// the volumes the node service maps; not a driver that quietly runs
// without TLS.
func TestCSITLSKeyFile(t *testing.T) {
	_, _, err := run(t, "csi", "--endpoint", "unix:///nonexistent/csi.sock", "--mode", "node", "--node-id", "n1",
		"--tls-key-file", "/nonexistent/key")
	if ExitCode(err) != 2 || !strings.Contains(err.Error(), "nvstripe agent --tls-key-file") {
		t.Errorf("nvstripe csi --tls-key-file: %v (exit %d), want a usage error naming the agent's flag", err, ExitCode(err))
	}
}
