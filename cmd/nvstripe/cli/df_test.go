package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/meta/metatest"
)

// TestCapacity: df shows human sizes per failure domain and bytes in JSON;
// volume create warns once thin volumes promise more than the usable space
// and refuses past the limit, which cluster set raises.
func TestCapacity(t *testing.T) {
	a := initCluster(t, "cap")
	a.addHosts(0, 3, "11MiB")
	// 3 namespaces of 10 shard slots: 2+1 fills 10 segments, 20 MiB of data.
	a.ok("created", "volume", "create", "a", "--size", "20MiB", "--k", "2", "--m", "1")
	out := a.ok("host=h0", "df")
	for _, want := range []string{"10 MiB", "total", "30 MiB", "usable for 2+1 volumes: 20 MiB of data", "overcommit 1.00 (promised / usable), limit 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("df output lacks %q:\n%s", want, out)
		}
	}
	_, stderr, err := run(t, "volume", "create", "b", "--size", "10MiB", "--k", "2", "--m", "1", "--etcd", a.etcd, "--cluster", a.cluster)
	if err != nil || !strings.Contains(stderr, "warning: volume b: thin volumes would promise 45 MiB after parity, 1.50 times the 30 MiB usable") {
		t.Errorf("create past the usable space: %v, stderr %q", err, stderr)
	}
	a.fails("above the cluster's limit of 2 (raise it with `nvstripe cluster set --max-overcommit R`", "volume", "create", "c", "--size", "12MiB", "--k", "2", "--m", "1")
	a.fails("want a ratio from 1 to 1000", "cluster", "set", "--max-overcommit", "0.5")
	a.ok("max overcommit 3", "cluster", "set", "--max-overcommit", "3")
	a.ok("max overcommit 3", "cluster", "info")
	a.ok("created", "volume", "create", "c", "--size", "12MiB", "--k", "2", "--m", "1")
	a.fails("volume c (40 MiB): thin volumes would promise 105 MiB after parity, 3.50 times", "volume", "resize", "c", "--size", "40MiB")
	var js struct {
		Space struct {
			Raw        int64 `json:"raw_bytes"`
			Promised   int64 `json:"promised_bytes"`
			Overcommit float64
			Domains    []struct {
				Domain string `json:"domain"`
				Usable int64  `json:"usable_bytes"`
			}
		}
		MaxOvercommit float64 `json:"max_overcommit"`
	}
	if err := json.Unmarshal([]byte(a.ok("raw_bytes", "df", "-o", "json")), &js); err != nil {
		t.Fatal(err)
	}
	if js.Space.Raw != 30<<20 || js.Space.Promised != 63<<20 || len(js.Space.Domains) != 3 || js.Space.Domains[0].Usable != 10<<20 || js.MaxOvercommit != 3 {
		t.Errorf("df -o json: %+v", js)
	}
}

// TestErrorMessages: the common failure paths of the CLI name records for
// people (no etcd keys), say their class once, and say what to do.
func TestErrorMessages(t *testing.T) {
	a := initCluster(t, "errs")
	a.addHosts(0, 3, "11MiB")
	a.ok("created", "volume", "create", "v", "--size", "2MiB", "--k", "2", "--m", "1")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "init"}, `cluster "errs" is already initialized`},
		{[]string{"host", "add", "h0"}, `host "h0" already exists`},
		{[]string{"ns", "add", "--host", "h9", "--nqn", "nqn.test:h9", "--nsid", "1", "--path", "tcp://127.0.0.1:4420", "--size", "11MiB"},
			"host \"h9\" not found (add it first with `nvstripe host add h9`)"},
		{[]string{"ns", "add", "--host", "h0", "--nqn", "nqn.test:h0", "--nsid", "1", "--path", "tcp://127.0.0.1:4420", "--size", "11MiB", "--id", "x"},
			`namespace nqn.test:h0 nsid 1 is already recorded as "h0-n1"`},
		{[]string{"volume", "create", "v", "--size", "1MiB", "--k", "2", "--m", "1"}, `volume "v" already exists`},
		{[]string{"volume", "info", "nope"}, `volume "nope" not found`},
		{[]string{"volume", "rm", "nope"}, `volume "nope" not found`},
		{[]string{"ns", "set-state", "t9-n1", "out"}, `namespace "t9-n1" not found`},
		{[]string{"ns", "rm", "t9-n1"}, `namespace "t9-n1" not found`},
		{[]string{"host", "rm", "h9"}, `host "h9" not found`},
		{[]string{"host", "rm", "h0"}, "host h0 has 1 namespaces (h0-n1): remove them first (`nvstripe ns rm`), or pass --force"},
		{[]string{"admin", "fail", "t9-n1"}, `namespace "t9-n1" not found`},
		{[]string{"admin", "drain", "t9"}, `"t9" is neither a namespace nor a host with namespaces`},
		{[]string{"volume", "create", "w", "--size", "1MiB", "--k", "4", "--m", "2"}, "layout 4+2 needs 6 failure domains, the cluster has 3"},
	} {
		_, err := a.run(tc.args...)
		if err == nil {
			t.Errorf("%q succeeded", tc.args)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%q: %q, want it to contain %q", tc.args, msg, tc.want)
		}
		if strings.Contains(msg, "/nvstripe/") {
			t.Errorf("%q: %q names an etcd key", tc.args, msg)
		}
		for _, class := range []string{"not found", "already exists", "already", "invalid argument"} {
			if strings.Count(msg, class) > 1 {
				t.Errorf("%q: %q says %q twice", tc.args, msg, class)
			}
		}
	}
}

// TestSizesInLargestUnit: df, volume ls and the create message print sizes
// in the largest binary unit ("769.5 GiB after parity", not "787968 MiB"),
// and a decimal size is refused with the binary spelling suggested,
// creating nothing.
func TestSizesInLargestUnit(t *testing.T) {
	a := adminCLI{t: t, etcd: metatest.Start(t)[0], cluster: "big"}
	a.ok("initialized", "cluster", "init", "--slot-size", "1GiB")
	for i := range 3 {
		h := fmt.Sprintf("h%d", i)
		a.ok("added", "host", "add", h)
		a.ok("1 TiB", "ns", "add", "--host", h, "--nqn", "nqn.test:"+h, "--nsid", "1", "--path", "tcp://127.0.0.1:4420", "--size", "1TiB")
	}
	a.fails("did you mean 10GiB? (sizes are binary: KiB, MiB, GiB, TiB)", "volume", "create", "v", "--size", "10GB")
	a.ok("volume v created: 513 GiB, 2+1, chunk 128 KiB", "volume", "create", "v", "--size", "513GiB", "--k", "2", "--m", "1")
	a.ok("volumes promise 513 GiB of data (769.5 GiB after parity)", "df")
	if out := a.ok("513 GiB", "volume", "ls"); strings.Count(out, "\n") != 2 {
		t.Errorf("volume ls lists more than v:\n%s", out)
	}
}
