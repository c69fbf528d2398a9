package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/metatest"
)

// clusterNotChecked names the commands taking --cluster that run without
// the cluster's records, and why.
var clusterNotChecked = map[string]string{
	"nvstripe config show":   "prints the settings; reads no cluster",
	"nvstripe target serve":  "a storage host's daemon: serves namespaces whether or not a cluster uses them yet",
	"nvstripe target agent":  "a storage host's daemon, like target serve",
	"nvstripe ns wipe-label": "works on a namespace's label, not on etcd",
}

// clusterTestFlags are flags a command needs to reach etcd at all (it
// checks its flags first).
var clusterTestFlags = map[string][]string{
	"nvstripe map":           {"--nbd-listen", "127.0.0.1:0"},
	"nvstripe cluster set":   {"--max-overcommit", "3"},
	"nvstripe ns add":        {"--host", "h0", "--nqn", "nqn.test:a", "--nsid", "1", "--path", "tcp://127.0.0.1:9", "--size", "8MiB"},
	"nvstripe volume create": {"--size", "1GiB"},
	"nvstripe volume resize": {"--size", "2GiB"},
	"nvstripe volume set":    {"--qos-iops", "100"},
}

// clusterTestArgs are the arguments, and flags, of commands that check
// their arguments before they reach etcd.
var clusterTestArgs = map[string][]string{
	"nvstripe ns discover":  {"tcp://127.0.0.1:9", "--host", "h0"},
	"nvstripe ns set-state": {"h0-n1", "in"},
}

// TestUnknownCluster walks every command that takes --cluster: for a
// cluster that does not exist each fails (exit status 1) naming the
// clusters that do and how to create it, instead of printing an empty
// listing. Commands that may run before the cluster exists are marked
// with annotationAnyCluster.
func TestUnknownCluster(t *testing.T) {
	ep := metatest.Start(t)[0]
	t.Setenv("NVSTRIPE_ETCD", ep)
	if _, _, err := run(t, "cluster", "init", "--cluster", "real", "--slot-size", "1MiB"); err != nil {
		t.Fatal(err)
	}
	n := 0
	walkRunnable(newRootCmd(), func(c *cobra.Command) {
		if c.Flag("cluster") == nil || c.Annotations[annotationAnyCluster] != "" || clusterNotChecked[c.CommandPath()] != "" {
			return
		}
		n++
		flags := append(clusterTestFlags[c.CommandPath()], "--cluster", "prod", "--timeout", "20s")
		var err error
		if args, ok := clusterTestArgs[c.CommandPath()]; ok {
			_, _, err = run(t, append(append(pathArgs(c), args...), flags...)...)
		} else {
			err = runWithSomeArgs(t, pathArgs(c), flags...)
		}
		want := "cluster \"prod\" (from flag --cluster) does not exist at " + ep + "; clusters there: real"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nvstripe cluster init --cluster prod") ||
			!errors.Is(err, meta.ErrNotInitialized) || ExitCode(err) != 1 {
			t.Errorf("%s --cluster prod: %v (exit %d), want %s ... and how to create it", c.CommandPath(), err, ExitCode(err), want)
		}
	})
	if n < 20 {
		t.Errorf("only %d commands take --cluster", n)
	}
	_, _, err := run(t, "volume", "ls", "--etcd", metatest.Start(t)[0])
	if err == nil || !strings.Contains(err.Error(), "no cluster is initialized there: create one with `nvstripe cluster init`") {
		t.Errorf("volume ls on an empty etcd: %v", err)
	}
}

// runWithSomeArgs runs path with flags and as many positional arguments
// ("x") as it accepts, up to three, and returns the first error that is
// not about their number.
func runWithSomeArgs(t *testing.T, path []string, flags ...string) error {
	t.Helper()
	var err error
	for i := range 4 {
		args := append(append(path[:len(path):len(path)], strings.Fields(strings.Repeat("x ", i))...), flags...)
		_, _, err = run(t, args...)
		if err == nil || !strings.Contains(err.Error(), "arg(s)") {
			return err
		}
	}
	return err
}
