// Command stack is `make bench-stack`: the whole data path as users run
// it, measured beside nbdkit's memory plugin in the same run.
//
// It starts `nvstripe etcd`, six `nvstripe target serve` processes (their
// namespace files on tmpfs), creates a 4+2 volume with the defaults
// (crc32c checksums and the write log) and maps it with `nvstripe map
// NAME --nbd-listen ADDR`, all real processes with the flags users pass.
// fio (nbd engine) then runs the same jobs against that export and against
// `nbdkit memory`, interleaved job by job for -rounds rounds, and the
// command prints one table: throughput or IOPS, CPU time per GiB or per IO
// of each process group (map, the targets summed, fio; nbdkit and fio for
// the baseline), and completion-latency percentiles for the QD1 jobs. CPU
// times come from /proc/PID/stat (utime+stime of the process and all its
// threads) sampled before and after each job; fio's own from its rusage.
// Where the nbd kernel module is loaded and nbd-client is installed, the
// export is also attached as /dev/nbdN and measured with libaio.
//
// -noisy measures a latency-sensitive victim volume (4 KiB QD1 random
// reads) alone and beside a greedy neighbour volume (1 MiB QD64 writes)
// on the same targets; -neighbour-flags adds a third neighbour created
// with those `volume create` flags (per-volume QoS).
//
// -profile collects a CPU profile of the map and of one target during each
// job of the first round (through their --pprof listeners) into the output
// folder. Figures are only comparable within one run: it reports ratios
// against the baseline measured beside them.
//
// It is a benchmark tool, not part of the nvstripe binary; scripts/bench-stack.sh
// builds the binary and runs it with the settings of the environment.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/nvstripe/nvstripe/internal/units"
)

// options are the command's flags.
type options struct {
	bin, out, work, output string
	// floor is the test/bench/floor binary: run beside the 1 MiB jobs
	// (empty: no floor rows).
	floor           string
	size            int64
	nsSize          string
	runtime, rounds int
	profile, noisy  bool
	withoutLog      bool // a second volume without the write log, for the write jobs
	neighbourFlags  string
	// jobs are the table's jobs that -jobs selects.
	jobs   []job
	stdout io.Writer
}

func main() {
	var o options
	o.size = 1 << 30
	flag.StringVar(&o.bin, "nvstripe", "./nvstripe", "the nvstripe binary")
	flag.Var(units.NewFlag(&o.size), "size", "size of each volume and of the nbdkit export")
	flag.StringVar(&o.nsSize, "ns-size", "16GiB", "size of each target's namespace file (sparse, on tmpfs; the cluster's 4 GiB slots: a label slot and one per volume)")
	flag.IntVar(&o.runtime, "runtime", 5, "seconds per fio job")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of every job on every server, interleaved")
	flag.StringVar(&o.out, "out", "", "output folder: the table, the JSON, fio's reports, the processes' log and profiles (default test/bench/out/stack-TIME)")
	flag.StringVar(&o.work, "work", "/dev/shm", "where the targets' files and etcd's data go (a tmpfs)")
	flag.StringVar(&o.floor, "floor", "", "the test/bench/floor binary: measure the copy floor of the 1 MiB jobs in every round (map and targets CPU over the kernel's cost of the same traffic)")
	flag.StringVar(&o.output, "o", "text", "output format on stdout: text or json")
	flag.BoolVar(&o.profile, "profile", false, "collect a CPU profile of the map and of one target per job (first round)")
	flag.BoolVar(&o.withoutLog, "without-log", true, "also run the write jobs on a second volume created with --write-log none, and give the log's cost")
	flag.BoolVar(&o.noisy, "noisy", false, "the noisy-neighbour benchmark instead of the table")
	flag.StringVar(&o.neighbourFlags, "neighbour-flags", "", "with -noisy: `volume create` flags of a third, limited neighbour (e.g. \"--qos-iops 500\")")
	jobs := flag.String("jobs", "", "run only the table's jobs whose names match this regular expression (e.g. QD1)")
	flag.Parse()
	var err error
	if o.jobs, err = selectJobs(*jobs); err != nil {
		fmt.Fprintln(os.Stderr, "bench-stack:", err)
		os.Exit(2)
	}
	o.stdout = os.Stdout
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-stack:", err)
		os.Exit(1)
	}
}

// run sets up the output folder and the stack, runs the benchmark and
// tears everything down.
func run(o options) error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("-o %q: want text or json", o.output)
	}
	for _, tool := range []string{"fio", "nbdkit"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed (Debian package %s)", tool, tool)
		}
	}
	if o.out == "" {
		o.out = filepath.Join("bench", "out", "stack-"+time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(o.out, "processes.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	work, err := os.MkdirTemp(o.work, "nvstripe-bench-stack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "bench-stack: starting etcd and %d targets (log: %s)\n", numTargets, logf.Name())
	c, err := startCluster(o.bin, work, logf, o.nsSize) // an *os.File takes concurrent writes whole
	defer c.stop()
	if err != nil {
		return err
	}
	if o.noisy {
		return runNoisy(ctx, o, c)
	}
	return runTable(ctx, o, c)
}

// selectJobs returns the table's jobs whose names match expr (all for "").
func selectJobs(expr string) ([]job, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("-jobs: %w", err)
	}
	var jobs []job
	for _, j := range stackJobs {
		if re.MatchString(j.Name) {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("-jobs %q matches none of the jobs", expr)
	}
	return jobs, nil
}

// save writes v as JSON to out/name and, with -o json, to stdout; text is
// written to out/table.txt and, with -o text, to stdout.
func save(o options, v any, text string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := os.WriteFile(filepath.Join(o.out, "result.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "table.txt"), []byte(text), 0o644); err != nil {
		return err
	}
	if o.output == "json" {
		_, err = o.stdout.Write(b)
	} else {
		_, err = io.WriteString(o.stdout, text)
	}
	fmt.Fprintf(os.Stderr, "bench-stack: results in %s\n", o.out)
	return err
}
