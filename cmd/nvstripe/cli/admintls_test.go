package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/nbd/nbdtest"
)

// TestAdminAPIOverTCP: the controller refuses a TCP admin API without
// mutual TLS; with it, `admin status` works with the client's certificate
// and is refused without one.
func TestAdminAPIOverTCP(t *testing.T) {
	a, _ := adminFixture(t)
	a.fails("--admin-tls-cert", "controller", "--holder", "c0", "--api", "127.0.0.1:0", "--probe=false")

	pki := nbdtest.NewPKI(t)
	sdir, cdir := pki.ServerDir, pki.ClientDir
	out, _ := startController(t, a, "c0", "--api", "127.0.0.1:0", "--admin-tls-cert", filepath.Join(sdir, "server-cert.pem"),
		"--admin-tls-key", filepath.Join(sdir, "server-key.pem"), "--admin-tls-ca", filepath.Join(sdir, "ca-cert.pem"))
	var api string
	waitCLI(t, "the admin API", func() bool { api = afterLine(out.String(), "admin API on "); return api != "" })
	rpc := adminCLI{t: t, etcd: "127.0.0.1:1", cluster: a.cluster} // etcd unreachable: only the API works
	rpc.ok("controller leader:", "admin", "status", "--controller", api, "--admin-tls-cert", filepath.Join(cdir, "client-cert.pem"),
		"--admin-tls-key", filepath.Join(cdir, "client-key.pem"), "--admin-tls-ca", filepath.Join(cdir, "ca-cert.pem"))
	rpc.fails("--admin-tls-cert", "admin", "status", "--controller", api)
	other := nbdtest.NewPKI(t).ClientDir
	rpc.fails("controller", "admin", "status", "--controller", api, "--admin-tls-cert", filepath.Join(other, "client-cert.pem"),
		"--admin-tls-key", filepath.Join(other, "client-key.pem"), "--admin-tls-ca", filepath.Join(cdir, "ca-cert.pem"), "--timeout", "3s")
}

// afterLine returns the rest of the line of out after prefix, "" if none.
func afterLine(out, prefix string) string {
	_, rest, ok := strings.Cut(out, prefix)
	if !ok {
		return ""
	}
	rest, _, _ = strings.Cut(rest, "\n")
	return rest
}
