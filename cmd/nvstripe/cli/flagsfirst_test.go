package cli

import (
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestFlagsCheckedBeforeEtcd: with nothing listening at --etcd, commands
// given wrong flags or arguments fail with their own usage error (exit
// status 2), not with the etcd one: they check before dialling.
func TestFlagsCheckedBeforeEtcd(t *testing.T) {
	etcd := testutil.FreeAddr(t) // closed again: nothing listens
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"volume", "info"}, "accepts 1 arg(s)"},
		{[]string{"volume", "create", "v"}, "volume create needs --size"},
		{[]string{"volume", "create", "v", "--size", "1GiB", "--qos-iops", "-1"}, "--qos-iops"},
		{[]string{"volume", "create", "v", "--size", "1GiB", "--k", "0"}, "layout k=0 m=2: need k >= 1, m >= 0, k+m <= 32"},
		{[]string{"volume", "create", "v", "--size", "1GiB", "--m", "-1"}, "layout k=4 m=-1: need k >= 1"},
		{[]string{"volume", "create", "v", "--size", "1GiB", "--k", "30", "--m", "3"}, "layout k=30 m=3: need k >= 1"},
		{[]string{"volume", "create", "v", "--size", "1GiB", "--chunk", "96KiB"}, "chunk 98304: must be a power of two from 4KiB to 4MiB"},
		{[]string{"volume", "create", "v", "--size", "1GiB", "--chunk", "8MiB"}, "chunk 8388608: must be a power of two from 4KiB to 4MiB"},
		{[]string{"volume", "create", "v", "--size", "1GiB", "--checksum", "none", "--write-log", "ppl"}, `write log "ppl" needs checksums`},
		{[]string{"volume", "resize", "v"}, "volume resize needs --size"},
		{[]string{"volume", "set", "v"}, "volume set needs at least one --qos-* flag"},
		{[]string{"cluster", "set"}, "cluster set needs --max-overcommit"},
		{[]string{"host", "add", "h0", "--label", "rack"}, "rack"},
		{[]string{"ns", "add", "--host", "h0"}, "--nqn"},
		{[]string{"ns", "discover", "tcp://127.0.0.1:9"}, "ns discover needs --host"},
		{[]string{"ns", "wipe-label", "--nqn", "nqn.test:a"}, "ns wipe-label needs --nqn, --nsid and at least one --path"},
		{[]string{"ns", "set-state", "h0-n1", "sideways"}, "sideways"},
		{[]string{"admin", "rebalance", "--threshold", "2"}, "--threshold 2: want a fraction between 0 and 1"},
	} {
		_, _, err := run(t, append(c.args, "--etcd", etcd, "--etcd-timeout", "20s", "--timeout", "30s")...)
		if err == nil || !strings.Contains(err.Error(), c.want) || ExitCode(err) != 2 {
			t.Errorf("%q with nothing at --etcd: %v (exit %d), want a usage error containing %q", c.args, err, ExitCode(err), c.want)
		}
	}
}
