package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// job is one fio workload.
type job struct {
	Name string `json:"name"`
	RW   string `json:"rw"` // fio's --rw
	BS   string `json:"bs"`
	QD   int    `json:"qd"`
	// Small says the row reports IOPS and CPU per IO (else MiB/s and CPU
	// per GiB); Latency says it reports the completion latency percentiles.
	Small   bool `json:"small"`
	Latency bool `json:"latency"`
}

// write says whether the job writes.
func (j job) write() bool { return strings.Contains(j.RW, "write") }

// stackJobs are the jobs of the table, in the order they run in a round.
var stackJobs = []job{
	{Name: "write 1MiB QD16", RW: "write", BS: "1M", QD: 16},
	{Name: "read 1MiB QD16", RW: "read", BS: "1M", QD: 16},
	{Name: "randwrite 4KiB QD32", RW: "randwrite", BS: "4k", QD: 32, Small: true},
	{Name: "randread 4KiB QD32", RW: "randread", BS: "4k", QD: 32, Small: true},
	{Name: "randread 4KiB QD1", RW: "randread", BS: "4k", QD: 1, Small: true, Latency: true},
	{Name: "randwrite 4KiB QD1", RW: "randwrite", BS: "4k", QD: 1, Small: true, Latency: true},
}

// percentiles are the latency percentiles reported (fio's --percentile_list).
var percentiles = []float64{50, 99, 99.9, 99.99}

// device is where fio sends a job: an NBD URI (fio's nbd engine) or a
// kernel block device (libaio, O_DIRECT).
type device struct {
	uri, path string
}

// fioArgs are fio's arguments for j on d over size bytes: timed for
// runtime seconds, or one pass over the device when runtime is 0.
func fioArgs(j job, d device, size int64, runtime int) []string {
	args := []string{"--name=" + strings.ReplaceAll(j.Name, " ", "-"), "--rw=" + j.RW, "--bs=" + j.BS,
		"--iodepth=" + strconv.Itoa(j.QD), "--size=" + strconv.FormatInt(size, 10),
		"--output-format=json+", "--percentile_list=" + percentileList(), "--randrepeat=0"}
	if d.path != "" {
		args = append(args, "--ioengine=libaio", "--direct=1", "--filename="+d.path)
	} else {
		args = append(args, "--ioengine=nbd", "--uri="+d.uri)
	}
	if runtime > 0 {
		args = append(args, "--time_based", "--runtime="+strconv.Itoa(runtime))
	}
	return args
}

// percentileList is percentiles as fio's --percentile_list wants them.
func percentileList() string {
	s := make([]string, len(percentiles))
	for i, p := range percentiles {
		s[i] = strconv.FormatFloat(p, 'f', -1, 64)
	}
	return strings.Join(s, ":")
}

// fioRun is what one fio run measured.
type fioRun struct {
	Bytes, IOs int64
	Seconds    float64 // fio's own runtime of the job
	CPU        float64 // fio's user+system CPU seconds (its job process included)
	// Bins is fio's completion-latency histogram (json+): nanoseconds to
	// counts, merged across rounds for the percentiles.
	Bins map[int64]int64
}

// fioTimeout bounds one fio run, so that a stuck server fails the
// benchmark instead of hanging it (a fill of SIZE at a few MiB/s fits).
const fioTimeout = 30 * time.Minute

// runFio runs fio and parses its JSON report; the report is kept in
// keep when it is not "".
func runFio(ctx context.Context, args []string, keep string) (fioRun, error) {
	ctx, cancel := context.WithTimeout(ctx, fioTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "fio", args...)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if e, ok := err.(*exec.ExitError); ok {
			msg = string(e.Stderr)
		}
		return fioRun{}, fmt.Errorf("fio %s: %w: %s%s", strings.Join(args, " "), err, msg, out)
	}
	if keep != "" {
		os.MkdirAll(filepath.Dir(keep), 0o755)
		os.WriteFile(keep, out, 0o644)
	}
	r, err := parseFio(out)
	if err != nil {
		return r, fmt.Errorf("fio %s: %w", strings.Join(args, " "), err)
	}
	r.CPU = cmd.ProcessState.UserTime().Seconds() + cmd.ProcessState.SystemTime().Seconds()
	return r, nil
}

// fioReport is the part of fio's JSON report read here.
type fioReport struct {
	Jobs []struct {
		Error int  `json:"error"`
		Read  side `json:"read"`
		Write side `json:"write"`
	} `json:"jobs"`
}

type side struct {
	IOBytes  int64 `json:"io_bytes"`
	TotalIOs int64 `json:"total_ios"`
	Runtime  int64 `json:"runtime"` // ms
	ClatNS   struct {
		Bins map[string]int64 `json:"bins"`
	} `json:"clat_ns"`
}

// parseFio reads a fio report (json+) of one job. fio may print lines
// before the JSON (notes about the engine): they are skipped.
func parseFio(out []byte) (fioRun, error) {
	if i := strings.IndexByte(string(out), '{'); i > 0 {
		out = out[i:]
	}
	var rep fioReport
	if err := json.Unmarshal(out, &rep); err != nil {
		return fioRun{}, fmt.Errorf("parsing its report: %w", err)
	}
	if len(rep.Jobs) != 1 || rep.Jobs[0].Error != 0 {
		return fioRun{}, fmt.Errorf("report has %d jobs (want 1) or a job error", len(rep.Jobs))
	}
	r := fioRun{Bins: map[int64]int64{}}
	for _, s := range []side{rep.Jobs[0].Read, rep.Jobs[0].Write} {
		r.Bytes += s.IOBytes
		r.IOs += s.TotalIOs
		r.Seconds = math.Max(r.Seconds, float64(s.Runtime)/1000)
		for k, n := range s.ClatNS.Bins {
			ns, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				return r, fmt.Errorf("latency bin %q: %w", k, err)
			}
			r.Bins[ns] += n
		}
	}
	if r.IOs == 0 || r.Seconds == 0 {
		return r, fmt.Errorf("the job did no IO")
	}
	return r, nil
}

// percentile is the p-th percentile of the histogram bins (ns -> count),
// in microseconds; 0 when it is empty.
func percentile(bins map[int64]int64, p float64) float64 {
	keys := make([]int64, 0, len(bins))
	var total int64
	for k, n := range bins {
		keys = append(keys, k)
		total += n
	}
	if total == 0 {
		return 0
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	want := int64(math.Ceil(p / 100 * float64(total)))
	var seen int64
	for _, k := range keys {
		if seen += bins[k]; seen >= want {
			return float64(k) / 1000
		}
	}
	return float64(keys[len(keys)-1]) / 1000
}
