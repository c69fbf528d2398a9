package cli

import (
	"path/filepath"
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
		{[]string{"admin", "scrub", "v", "--wait", "--owner-grace", "0s"}, "--owner-grace 0s: give how long a wait waits for the scrub's owner to map the volume again, above 0 (default 30s)"},
		{[]string{"map", "v", "--nbd-listen", "127.0.0.1:0", "--lease-ttl", "1s"}, "--lease-ttl 1s: an ownership lease lasts at least 2s: give 2s or more (0: the default, 10s)"},
		{[]string{"map", "v", "--nbd-listen", "127.0.0.1:0", "--holder", "map/1"}, `--holder: holder name "map/1": use 1-63 letters`},
	} {
		_, _, err := run(t, append(c.args, "--etcd", etcd, "--etcd-timeout", "20s", "--timeout", "30s")...)
		if err == nil || !strings.Contains(err.Error(), c.want) || ExitCode(err) != 2 {
			t.Errorf("%q with nothing at --etcd: %v (exit %d), want a usage error containing %q", c.args, err, ExitCode(err), c.want)
		}
	}
}

// TestDaemonFlagsCheckedBeforeEtcd: with nothing listening at --etcd, the
// agent and the controller given a flag they can check alone (a
// duration, a count, an address, a host NQN, a secret or TLS file) fail
// at once with its error, not with the etcd one: they check it before
// dialling. Mistakes in flags exit with status 2, unreadable secret and
// certificate files with 1.
func TestDaemonFlagsCheckedBeforeEtcd(t *testing.T) {
	etcd := testutil.FreeAddr(t) // closed again: nothing listens
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		args []string
		want string
		exit int
	}{
		{[]string{"agent", "--metrics", "localhost"}, `--metrics "localhost": want HOST:PORT`, 2},
		{[]string{"agent", "--metrics", "127.0.0.1:70000"}, `port "70000" is not a number from 0 to 65535`, 2},
		{[]string{"agent", "--host-traddr", "eth0"}, `host traddr "eth0" is not an IP address`, 2},
		{[]string{"agent", "--host-nqn", "host1"}, `--host-nqn: invalid host identity: NQN "host1"`, 2},
		{[]string{"agent", "--tls", "require"}, "--tls require needs --tls-certificates DIR", 2},
		{[]string{"agent", "--tls", "on", "--tls-certificates", missing}, "--tls-certificates: certificate " + missing, 1},
		{[]string{"agent", "--dhchap-secret-file", missing}, "--dhchap-secret-file: open " + missing, 1},
		{[]string{"agent", "--tls-key-file", missing}, "--tls-key-file: open " + missing, 1},
		{[]string{"agent", "--lease-ttl", "1s"}, "--lease-ttl 1s: an ownership lease lasts at least 2s: give 2s or more (0: the default, 10s)", 2},
		{[]string{"agent", "--lease-ttl", "-10s"}, "--lease-ttl -10s: an ownership lease lasts at least 2s", 2},
		{[]string{"agent", "--recheck-interval", "-1s"}, "--recheck-interval -1s: negative: give 0 (the default, 10s) or more", 2},
		{[]string{"agent", "--socket", ""}, "--socket is empty: give the path of the unix socket of the agent's API", 2},
		{[]string{"agent", "--state-dir", ""}, "--state-dir is empty: give the directory where the agent records its mappings", 2},
		{[]string{"agent", "--holder", "agent/1"}, `--holder: holder name "agent/1": use 1-63 letters`, 2},
		{[]string{"controller", "--leader-ttl", "1s"}, "--leader-ttl 1s: the controller also holds the volumes it moves that long, and an ownership lease lasts at least 2s", 2},
		{[]string{"controller", "--interval", "-1s"}, "--interval -1s: negative: give 0 (the default, 1s) or more", 2},
		{[]string{"controller", "--scrub-interval", "-1h"}, "--scrub-interval -1h0m0s: negative: give 0 (no scheduled scrubs) or more", 2},
		{[]string{"agent", "--fail-namespace-after", "0"}, "--fail-namespace-after 0: give how many media errors mark a namespace failed, 1 or more, or -1 for never", 2},
		{[]string{"agent", "--fail-namespace-after", "-2"}, "--fail-namespace-after -2: give how many", 2},
		{[]string{"controller", "--scrub-interval", "5ns"}, "--scrub-interval 5ns: give 1s or more, or 0 for no scheduled scrubs", 2},
		{[]string{"controller", "--probe-timeout", "0s"}, "ProbeTimeout 0s (--probe-timeout): a probe needs a time limit: give one above 0 (default 1s), or turn Probe off (--probe=false)", 2},
		{[]string{"controller", "--holder", "-c1"}, `--holder: holder name "-c1": use 1-63 letters`, 2},
		{[]string{"controller", "--out-after", "-1s"}, "controller config: negative OutAfter", 2},
		{[]string{"controller", "--max-moves-per-ns", "-1"}, "controller config: negative OutAfter, MaxMoves or MaxMovesPerNS", 2},
		{[]string{"controller", "--min-up", "2"}, "MinUpFraction 2 above 1", 2},
		{[]string{"controller", "--grace", "-1s"}, "tracker config", 2},
		{[]string{"controller", "--gossip-join", "127.0.0.1:7946"}, "--gossip-join and --gossip-host need --gossip", 2},
		{[]string{"controller", "--gossip", "localhost:7946"}, `gossip address "localhost:7946": want IP:PORT`, 2},
		{[]string{"controller", "--gossip", "127.0.0.1:0", "--gossip-key-file", missing}, "gossip key: open " + missing, 2},
		{[]string{"controller", "--api", "127.0.0.1:0"}, "the admin API on TCP needs mutual TLS", 2},
		{[]string{"controller", "--api", "127.0.0.1:0", "--admin-tls-cert", missing, "--admin-tls-key", missing, "--admin-tls-ca", missing},
			"admin API TLS: certificate " + missing, 2},
		{[]string{"controller", "--api", "controller.sock"}, `admin API address "controller.sock": want unix:PATH, /PATH or HOST:PORT`, 2},
		{[]string{"controller", "--metrics", "9475"}, `--metrics "9475": want HOST:PORT`, 2},
		{[]string{"controller", "--host-traddr", "eth0"}, `host traddr "eth0" is not an IP address`, 2},
		{[]string{"controller", "--host-nqn", "host1"}, `--host-nqn: invalid host identity: NQN "host1"`, 2},
		{[]string{"controller", "--dhchap-secret-file", missing}, "--dhchap-secret-file: open " + missing, 1},
		{[]string{"controller", "--tls-key-file", missing}, "--tls-key-file: open " + missing, 1},
	} {
		_, _, err := run(t, append(c.args, "--etcd", etcd, "--etcd-timeout", "20s")...)
		if err == nil || !strings.Contains(err.Error(), c.want) || ExitCode(err) != c.exit {
			t.Errorf("%q with nothing at --etcd: %v (exit %d), want an error containing %q, exit %d", c.args, err, ExitCode(err), c.want, c.exit)
		}
	}
}
