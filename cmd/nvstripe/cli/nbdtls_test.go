package cli

import (
	"context"
	"os/exec"
	"regexp"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// TestMapTLS: 'map --nbd-listen --tls require --tls-verify-peer' serves
// the volume to a libnbd client with a certificate only. The certificates
// are RSA, as certtool and openssl make them by default, which nbdinfo
// did not send to the server under TLS 1.3 (ECDSA ones are tested in
// package nbd).
func TestMapTLS(t *testing.T) {
	nbdinfo, err := exec.LookPath("nbdinfo")
	if err != nil {
		t.Skip("nbdinfo (libnbd-bin) not installed")
	}
	cl := startMapCluster(t)
	ep := cl.etcd
	p := nbdtest.NewPKIOf(t, nbdtest.RSA)
	if _, _, err := run(t, "map", "v", "--nbd-listen", "127.0.0.1:0", "--etcd", ep, "--tls", "require"); ExitCode(err) != 2 {
		t.Errorf("--tls require without certificates: %v, want a usage error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testutil.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"map", "v", "--nbd-listen", "127.0.0.1:0", "--etcd", ep,
			"--tls", "require", "--tls-certificates", p.ServerDir, "--tls-verify-peer"}, &out, &errb)
	}()
	waitOutput(t, &out, done, "serving: nbd://")
	nbdAddr := regexp.MustCompile(`serving: nbd://([^/]+)/`).FindStringSubmatch(out.String())[1]
	if o, err := exec.Command(nbdinfo, "nbds://"+nbdAddr+"/v?tls-certificates="+p.ClientDir).CombinedOutput(); err != nil {
		t.Errorf("nbdinfo over TLS: %v\n%s", err, o)
	}
	for _, u := range []string{"nbd://" + nbdAddr + "/v", "nbds://" + nbdAddr + "/v?tls-certificates=" + p.CAOnlyDir} {
		if o, err := exec.Command(nbdinfo, u).CombinedOutput(); err == nil {
			t.Errorf("nbdinfo %s succeeded:\n%s", u, o)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("map: %v\n%s", err, errb.String())
	}
}
