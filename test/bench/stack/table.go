package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/internal/table"
)

// server is one thing fio measures: the stack's NBD export, its kernel
// device, or nbdkit; groups are the processes whose CPU time is reported.
type server struct {
	Name   string
	dev    device
	groups []namedGroup
	// pprof are the --pprof addresses to profile during a job (-profile),
	// by file name suffix.
	pprof map[string]string
	// only, when set, picks the jobs this server runs (the others are
	// left blank in the table).
	only func(job) bool
}

// runs reports whether s runs job j.
func (s server) runs(j job) bool { return s.only == nil || s.only(j) }

// noLogName is the server of the volume without the write log (-without-log).
const noLogName = "--write-log none"

type namedGroup struct {
	name string
	g    group
}

// total is one job on one server, summed over the rounds.
type total struct {
	bytes, ios int64
	seconds    float64
	cpu        map[string]float64 // seconds per group, and "fio"
	bins       map[int64]int64
}

func (t *total) add(r fioRun, cpu map[string]float64) {
	t.bytes += r.Bytes
	t.ios += r.IOs
	t.seconds += r.Seconds
	if t.cpu == nil {
		t.cpu, t.bins = map[string]float64{}, map[int64]int64{}
	}
	for k, v := range cpu {
		t.cpu[k] += v
	}
	for k, v := range r.Bins {
		t.bins[k] += v
	}
}

// runTable creates and maps the volume, starts nbdkit, and runs every
// job on every server for the rounds, interleaved.
func runTable(ctx context.Context, o options, c *cluster) error {
	if err := c.createVolume("bench", fmt.Sprint(o.size)); err != nil {
		return err
	}
	m, err := c.mapVolume("bench")
	if err != nil {
		return err
	}
	stackGroups := []namedGroup{{"map", group{m.proc}}, {"targets", c.targets}}
	servers := []server{{Name: "nvstripe", dev: device{uri: m.uri}, groups: stackGroups,
		pprof: map[string]string{"map": m.pprof, "target": c.targetPprof}}}
	if o.withoutLog {
		nl, err := noLogServer(c, o.size)
		if err != nil {
			return err
		}
		servers = append(servers, nl)
	}
	if path, detach, err := attachKernel(c, m.uri); err != nil {
		fmt.Fprintf(os.Stderr, "bench-stack: no kernel device: %v\n", err)
	} else {
		defer detach()
		servers = append(servers, server{Name: "kernel " + path, dev: device{path: path}, groups: stackGroups})
	}
	nbdkit, err := startNbdkit(c, o.size)
	if err != nil {
		return err
	}
	servers = append(servers, nbdkit)
	totals, floors, err := measureAll(ctx, o, servers)
	if err != nil {
		return err
	}
	res := tableResult{Config: describe(o), Jobs: results(o.jobs, servers, totals)}
	addFloors(res.Jobs, floors)
	for _, s := range servers {
		res.Servers = append(res.Servers, s.Name)
	}
	return save(o, res, renderTable(res, servers))
}

// noLogServer creates and maps a second volume like the first but without
// the write log, for the write jobs: what the log costs, in the same run.
func noLogServer(c *cluster, size int64) (server, error) {
	if err := c.createVolume("nolog", fmt.Sprint(size), "--write-log", "none"); err != nil {
		return server{}, err
	}
	m, err := c.mapVolume("nolog")
	if err != nil {
		return server{}, err
	}
	return server{Name: noLogName, dev: device{uri: m.uri}, groups: []namedGroup{{"map", group{m.proc}}, {"targets", c.targets}},
		only: job.write}, nil
}

// startNbdkit serves `nbdkit memory SIZE` on a free port.
func startNbdkit(c *cluster, size int64) (server, error) {
	addr, err := freeAddr()
	if err != nil {
		return server{}, err
	}
	host, port, _ := net.SplitHostPort(addr)
	p, err := startProc(c.log, "nbdkit", "", 0, "nbdkit", "-f", "-i", host, "-p", port, "-e", "bench", "memory", fmt.Sprint(size))
	if err != nil {
		return server{}, err
	}
	c.procs = append(c.procs, p)
	if err := waitListening(addr, 30*time.Second); err != nil {
		return server{}, fmt.Errorf("nbdkit: %w", err)
	}
	return server{Name: "nbdkit", dev: device{uri: "nbd://" + addr + "/bench"}, groups: []namedGroup{{"nbdkit", group{p}}}}, nil
}

// waitListening waits until addr accepts TCP connections.
func waitListening(addr string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// measureAll fills every server once, then runs the rounds: each job on
// each server in turn, so that load from elsewhere hits all alike.
func measureAll(ctx context.Context, o options, servers []server) (map[string]map[string]*total, map[string]*floorTotal, error) {
	fill := job{Name: "fill", RW: "write", BS: "1M", QD: 16}
	for _, s := range servers {
		if !s.runs(fill) {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench-stack: filling %s\n", s.Name)
		if _, err := runFio(ctx, fioArgs(fill, s.dev, o.size, 0), ""); err != nil {
			return nil, nil, err
		}
	}
	totals, floors := map[string]map[string]*total{}, map[string]*floorTotal{}
	for round := range o.rounds {
		for _, j := range o.jobs {
			for _, s := range servers {
				if !s.runs(j) {
					continue
				}
				fmt.Fprintf(os.Stderr, "bench-stack: round %d/%d: %s on %s\n", round+1, o.rounds, j.Name, s.Name)
				keep := filepath.Join(o.out, "fio", fmt.Sprintf("%s-%s-%d.json", slug(j.Name), slug(s.Name), round+1))
				var profiles func()
				if o.profile && round == 0 {
					profiles = startProfiles(o, s, j)
				}
				r, cpu, err := measure(ctx, o, s, j, keep)
				if profiles != nil {
					profiles()
				}
				if err != nil {
					return nil, nil, err
				}
				if totals[j.Name] == nil {
					totals[j.Name] = map[string]*total{}
				}
				if totals[j.Name][s.Name] == nil {
					totals[j.Name][s.Name] = &total{}
				}
				totals[j.Name][s.Name].add(r, cpu)
			}
			if err := measureFloor(ctx, o, j, round, floors); err != nil {
				return nil, nil, err
			}
		}
	}
	return totals, floors, nil
}

// measure runs j on s, sampling the CPU time of s's groups around it.
func measure(ctx context.Context, o options, s server, j job, keep string) (fioRun, map[string]float64, error) {
	before := map[string]float64{}
	for _, g := range s.groups {
		t, err := g.g.cpu()
		if err != nil {
			return fioRun{}, nil, fmt.Errorf("%s: %w", g.name, err)
		}
		before[g.name] = t
	}
	r, err := runFio(ctx, fioArgs(j, s.dev, o.size, o.runtime), keep)
	if err != nil {
		return r, nil, err
	}
	cpu := map[string]float64{"fio": r.CPU}
	for _, g := range s.groups {
		t, err := g.g.cpu()
		if err != nil {
			return r, nil, fmt.Errorf("%s: %w", g.name, err)
		}
		cpu[g.name] = t - before[g.name]
	}
	return r, cpu, nil
}

// slug turns a name into a file name part.
func slug(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '/' {
			return '-'
		}
		return r
	}, s)
}

// tableResult is the JSON of the table (-o json, result.json).
type tableResult struct {
	Config  runConfig   `json:"config"`
	Servers []string    `json:"servers"` // the last is the baseline
	Jobs    []jobResult `json:"jobs"`
}

// runConfig says what was measured where.
type runConfig struct {
	Time     string    `json:"time"`
	Code     string    `json:"code"`
	CPUs     int       `json:"cpus"`
	Load     string    `json:"load"`
	Size     int64     `json:"size_bytes"`
	Runtime  int       `json:"runtime_s"`
	Rounds   int       `json:"rounds"`
	Volume   string    `json:"volume"`
	Profiled bool      `json:"profiled"`
	Pcts     []float64 `json:"percentiles"`
}

// jobResult is one job's figures on every server.
type jobResult struct {
	job
	Results map[string]serverResult `json:"results"` // by server name
	// Ratio is the first server's throughput over the baseline's (the
	// last server); LatencyRatio the first's percentiles over the
	// baseline's.
	Ratio        float64            `json:"ratio"`
	LatencyRatio map[string]float64 `json:"latency_ratio,omitempty"`
	// Floor is the copy floor measured beside the job (-floor), and the
	// stack's CPU over it.
	Floor *floorResult `json:"copy_floor,omitempty"`
	// LogCost is the default volume over the one without the write log
	// (-without-log, write jobs).
	LogCost *logCost `json:"log_cost,omitempty"`
}

// logCost is what the write log costs a job: the volume with it over the
// volume without it, for throughput (or IOPS) and CPU per GiB (or per
// IO) of the map and of the targets.
type logCost struct {
	Throughput float64 `json:"throughput"`
	MapCPU     float64 `json:"map_cpu"`
	TargetsCPU float64 `json:"targets_cpu"`
	StackCPU   float64 `json:"stack_cpu"` // map and targets together
}

// serverResult is a job's figures on one server, over all rounds.
type serverResult struct {
	MiBps       float64            `json:"mib_per_s"`
	IOPS        float64            `json:"iops"`
	CPUmsPerGiB map[string]float64 `json:"cpu_ms_per_gib"` // by group: map, targets, fio, nbdkit
	CPUusPerIO  map[string]float64 `json:"cpu_us_per_io"`
	LatencyUS   map[string]float64 `json:"latency_us,omitempty"` // by "p50", "p99", ...
}

// describe is the run's configuration.
func describe(o options) runConfig {
	code, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		code = []byte("unknown")
	}
	load, _ := os.ReadFile("/proc/loadavg")
	return runConfig{Time: time.Now().UTC().Format(time.RFC3339), Code: strings.TrimSpace(string(code)), CPUs: runtime.NumCPU(),
		Load: strings.Join(strings.Fields(string(load))[:3], " "), Size: o.size, Runtime: o.runtime, Rounds: o.rounds,
		Volume: "4+2, crc32c, write log (the defaults)", Profiled: o.profile, Pcts: percentiles}
}

// results turns the totals into the table's figures.
func results(jobs []job, servers []server, totals map[string]map[string]*total) []jobResult {
	var out []jobResult
	for _, j := range jobs {
		jr := jobResult{job: j, Results: map[string]serverResult{}}
		for _, s := range servers {
			if t := totals[j.Name][s.Name]; t != nil {
				jr.Results[s.Name] = figures(j, t)
			}
		}
		jr.LogCost = costOfLog(j, jr.Results[servers[0].Name], jr.Results, servers)
		first, base := jr.Results[servers[0].Name], jr.Results[servers[len(servers)-1].Name]
		jr.Ratio = ratio(first.MiBps, base.MiBps)
		if j.Latency {
			jr.LatencyRatio = map[string]float64{}
			for k, v := range first.LatencyUS {
				jr.LatencyRatio[k] = ratio(v, base.LatencyUS[k])
			}
		}
		out = append(out, jr)
	}
	return out
}

func figures(j job, t *total) serverResult {
	gib, ios := float64(t.bytes)/(1<<30), float64(t.ios)
	r := serverResult{MiBps: float64(t.bytes) / (1 << 20) / t.seconds, IOPS: ios / t.seconds,
		CPUmsPerGiB: map[string]float64{}, CPUusPerIO: map[string]float64{}}
	for g, sec := range t.cpu {
		r.CPUmsPerGiB[g] = sec * 1000 / gib
		r.CPUusPerIO[g] = sec * 1e6 / ios
	}
	if j.Latency {
		r.LatencyUS = map[string]float64{}
		for _, p := range percentiles {
			r.LatencyUS[pctName(p)] = percentile(t.bins, p)
		}
	}
	return r
}

// costOfLog compares the first server with the no-log one, where both ran j.
func costOfLog(j job, with serverResult, all map[string]serverResult, servers []server) *logCost {
	without, ok := all[noLogName]
	if !ok || len(servers) < 2 {
		return nil
	}
	v1, c1 := headline(j, with)
	v0, c0 := headline(j, without)
	return &logCost{Throughput: ratio(v1, v0), MapCPU: ratio(c1["map"], c0["map"]), TargetsCPU: ratio(c1["targets"], c0["targets"]),
		StackCPU: ratio(c1["map"]+c1["targets"], c0["map"]+c0["targets"])}
}

// headline is a job's figure on a server and its CPU by group: IOPS and
// µs per IO for the 4 KiB jobs, MiB/s and ms per GiB for the others.
func headline(j job, r serverResult) (float64, map[string]float64) {
	if j.Small {
		return r.IOPS, r.CPUusPerIO
	}
	return r.MiBps, r.CPUmsPerGiB
}

func pctName(p float64) string { return fmt.Sprintf("p%g", p) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// renderTable prints the table: one row per job (and one per percentile
// of the latency jobs), for each server its figure and its groups' CPU.
func renderTable(res tableResult, servers []server) string {
	var b strings.Builder
	cfg := res.Config
	fmt.Fprintf(&b, "bench-stack %s, code %s, %d CPUs, load %s; volume %s; size %s, fio %ds per job, %d rounds interleaved (sums)\n",
		cfg.Time, cfg.Code, cfg.CPUs, cfg.Load, cfg.Volume, fmtSize(cfg.Size), cfg.Runtime, cfg.Rounds)
	fmt.Fprintf(&b, "CPU: ms per GiB moved (1 MiB jobs) or µs per IO (4 KiB jobs), per process group; ratio: %s over %s (latency: the same)\n\n",
		servers[0].Name, servers[len(servers)-1].Name)
	w := table.NewRight(&b)
	head := []string{"job", "unit"}
	for _, s := range servers {
		head = append(head, s.Name)
		for _, g := range s.groups {
			head = append(head, g.name)
		}
		head = append(head, "fio")
	}
	fmt.Fprintln(w, strings.Join(append(head, "ratio"), "\t")+"\t")
	for _, jr := range res.Jobs {
		unit := "MiB/s | CPU ms/GiB"
		if jr.Small {
			unit = "IOPS | CPU µs/IO"
		}
		row := []string{jr.Name, unit}
		for _, s := range servers {
			r, ok := jr.Results[s.Name]
			if !ok {
				for range len(s.groups) + 2 {
					row = append(row, "")
				}
				continue
			}
			value, cpu := r.MiBps, r.CPUmsPerGiB
			if jr.Small {
				value, cpu = r.IOPS, r.CPUusPerIO
			}
			row = append(row, fmt.Sprintf("%.0f", value))
			for _, g := range append(groupNames(s), "fio") {
				row = append(row, fmt.Sprintf("%.0f", cpu[g]))
			}
		}
		fmt.Fprintln(w, strings.Join(append(row, fmt.Sprintf("%.2f", jr.Ratio)), "\t")+"\t")
		if f := jr.Floor; f != nil {
			pad := make([]string, len(head)-6)
			row := append([]string{"  copy floor", "MiB/s | CPU ms/GiB", fmt.Sprintf("%.0f", f.MiBps), fmt.Sprintf("%.0f", f.MapMs), fmt.Sprintf("%.0f", f.TargetsMs), fmt.Sprintf("%.0f", f.FioMs)}, pad...)
			fmt.Fprintln(w, strings.Join(row, "\t")+"\t")
			row = append([]string{"  over the floor", "×", "", fmt.Sprintf("%.2f", f.MapOver), fmt.Sprintf("%.2f", f.TargetsOver), ""}, pad...)
			fmt.Fprintln(w, strings.Join(row, "\t")+"\t")
		}
		if c := jr.LogCost; c != nil {
			row := []string{"  log / no log", "×", fmt.Sprintf("%.2f", c.Throughput), fmt.Sprintf("%.2f", c.MapCPU), fmt.Sprintf("%.2f", c.TargetsCPU), ""}
			fmt.Fprintln(w, strings.Join(append(row, make([]string, len(head)-6)...), "\t")+"\t")
		}
		if jr.Latency {
			for _, p := range percentiles {
				k := pctName(p)
				row := []string{"  latency " + k, "µs"}
				for _, s := range servers {
					lat := ""
					if r, ok := jr.Results[s.Name]; ok {
						lat = fmt.Sprintf("%.1f", r.LatencyUS[k])
					}
					row = append(row, lat)
					for range len(s.groups) + 1 {
						row = append(row, "")
					}
				}
				fmt.Fprintln(w, strings.Join(append(row, fmt.Sprintf("%.2f", jr.LatencyRatio[k])), "\t")+"\t")
			}
		}
	}
	w.Flush()
	return b.String()
}

func groupNames(s server) []string {
	var n []string
	for _, g := range s.groups {
		n = append(n, g.name)
	}
	return n
}

func fmtSize(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }
