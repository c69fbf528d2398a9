package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// smoke runs TestStackSmoke: it takes about a minute on 2 cores (building
// the binary, starting the processes), too long for every `go test`.
var smoke = flag.Bool("stack.smoke", false, "run the benchmark end to end once, small (TestStackSmoke)")

// The benchmark end to end over real processes (etcd, six targets, a map,
// nbdkit, fio), as small as it gets: the QD1 jobs on a 64 MiB volume for
// a second each. It checks what the table holds, never how fast anything
// is. Run it with `go test -run TestStackSmoke ./test/bench/stack -stack.smoke`
// after changing the benchmark or the commands it runs.
func TestStackSmoke(t *testing.T) {
	if !*smoke {
		t.Skip("the end-to-end run takes about a minute: go test -run TestStackSmoke ./test/bench/stack -stack.smoke")
	}
	for _, tool := range []string{"fio", "nbdkit"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian package %s)", tool, tool)
		}
	}
	dir := t.TempDir()
	bin := testutil.BuildNvstripe(t, dir)
	jobs, err := selectJobs("QD1$")
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	o := options{bin: bin, out: filepath.Join(dir, "out"), work: dir, output: "json", size: 64 << 20, nsSize: "16GiB",
		runtime: 1, rounds: 1, jobs: jobs, stdout: &stdout}
	if err := run(o); err != nil {
		log, _ := os.ReadFile(filepath.Join(o.out, "processes.log"))
		t.Fatalf("%v\nprocesses' log:\n%s", err, log)
	}
	var res tableResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not the JSON table: %v\n%s", err, stdout.Bytes())
	}
	if !slices.Equal(res.Servers, []string{"nvstripe", "nbdkit"}) || len(res.Jobs) != 2 {
		t.Fatalf("servers %v, %d jobs; want nvstripe and nbdkit, 2 jobs", res.Servers, len(res.Jobs))
	}
	groups := map[string][]string{"nvstripe": {"map", "targets", "fio"}, "nbdkit": {"nbdkit", "fio"}}
	for _, j := range res.Jobs {
		for server, names := range groups {
			checkResult(t, j.Name+" on "+server, j.Results[server], names)
		}
	}
	for _, f := range []string{"table.txt", "result.json", "processes.log"} {
		if _, err := os.Stat(filepath.Join(o.out, f)); err != nil {
			t.Errorf("output folder: %v", err)
		}
	}
	if reports, _ := filepath.Glob(filepath.Join(o.out, "fio", "*.json")); len(reports) != 4 {
		t.Errorf("%d fio reports kept, want 4 (2 jobs on 2 servers)", len(reports))
	}
}

// checkResult checks that one job's figures on one server are all there:
// IOPS, CPU per IO of each group, increasing latency percentiles.
func checkResult(t *testing.T, what string, r serverResult, groups []string) {
	t.Helper()
	if r.IOPS <= 0 {
		t.Errorf("%s: IOPS %g", what, r.IOPS)
	}
	for _, g := range groups {
		if _, ok := r.CPUusPerIO[g]; !ok {
			t.Errorf("%s: no CPU time of %s (have %v)", what, g, r.CPUusPerIO)
		}
	}
	last := 0.0
	for _, p := range percentiles {
		v := r.LatencyUS[pctName(p)]
		if v <= 0 || v < last {
			t.Errorf("%s: latency percentiles %v are not positive and increasing", what, r.LatencyUS)
			break
		}
		last = v
	}
}
