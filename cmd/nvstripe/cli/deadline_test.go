package cli

import (
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/internal/faultnet"
	"github.com/nvstripe/nvstripe/meta/metatest"
)

// stalledEtcd starts an etcd behind a fault proxy and a cluster with a
// volume "v" on it; it returns the proxy and a CLI pointed at it.
func stalledEtcd(t *testing.T) (*faultnet.Proxy, adminCLI) {
	t.Helper()
	p, err := faultnet.New(strings.TrimPrefix(metatest.Start(t)[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	a := adminCLI{t: t, etcd: p.Addr(), cluster: "stall"}
	a.ok("initialized", "cluster", "init", "--slot-size", "1MiB")
	a.addHosts(0, 2, "64MiB")
	a.ok("created", "volume", "create", "v", "--size", "1MiB", "--k", "1", "--m", "1")
	return p, a
}

// TestTimeoutNamesEtcd: with etcd not answering (the proxy holds every
// byte, as when etcd is stopped with SIGSTOP) a command fails after
// --timeout and says which etcd and what its probe found there (a server
// that accepts but sends nothing), instead of hanging or a bare "did not
// answer".
func TestTimeoutNamesEtcd(t *testing.T) {
	p, a := stalledEtcd(t)
	p.Stall()
	want := "etcd unreachable at " + p.Addr() + " (from flag --etcd): " + p.Addr() + " accepts connections but sent nothing back"
	for _, args := range [][]string{{"volume", "ls"}, {"host", "ls"}, {"admin", "status"}} {
		a.fails(want, append(args, "--timeout", "1s", "--etcd-timeout", "1s")...)
	}
}

// TestVolumeRmHalfDone: an rm whose etcd stops answering right after the
// volume was marked deleting fails after --timeout saying how to finish;
// run again, once etcd answers, it says it finishes the removal and does.
func TestVolumeRmHalfDone(t *testing.T) {
	p, a := stalledEtcd(t)
	p.StallAfter([]byte(`"state":"deleting"`))
	a.fails("run `nvstripe volume rm v` again to finish", "volume", "rm", "v", "--timeout", "2s")
	if !p.Stalled() {
		t.Fatal("rm never wrote the deleting state: the test stalled nothing")
	}
	p.Resume()
	a.ok("deleting", "volume", "ls")
	out := a.ok("volume v removed", "volume", "rm", "v")
	if !strings.Contains(out, "an earlier rm stopped half way") {
		t.Fatalf("second rm did not say it finished an earlier one:\n%s", out)
	}
	a.fails("not found", "volume", "info", "v")
}
