package main

import (
	"os"
	"strings"
	"testing"
)

// A report of fio 3.33 (json+, nbd engine, with the line the engine
// prints before the JSON): its IOs, bytes and latency histogram.
func TestParseFio(t *testing.T) {
	out, err := os.ReadFile("testdata/fio-randread-qd1.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseFio(out)
	if err != nil {
		t.Fatal(err)
	}
	var binned int64
	for _, n := range r.Bins {
		binned += n
	}
	if r.IOs != 6193 || r.Bytes != 6193*4096 || binned != r.IOs || r.Seconds <= 0 {
		t.Fatalf("parsed %d IOs, %d bytes, %d in the histogram, %.3f s; want 6193, 6193*4096, 6193, > 0", r.IOs, r.Bytes, binned, r.Seconds)
	}
	if p50, p99 := percentile(r.Bins, 50), percentile(r.Bins, 99); !(p50 > 0 && p50 <= p99) {
		t.Fatalf("p50 %.1f µs, p99 %.1f µs: want 0 < p50 <= p99", p50, p99)
	}
	if _, err := parseFio([]byte(`{"jobs": []}`)); err == nil {
		t.Fatal("a report without jobs parsed")
	}
	if _, err := parseFio([]byte(`fio: error`)); err == nil {
		t.Fatal("a report without JSON parsed")
	}
}

func TestPercentile(t *testing.T) {
	bins := map[int64]int64{1000: 50, 2000: 49, 9000: 1}
	for _, c := range []struct{ p, want float64 }{{50, 1}, {51, 2}, {99, 2}, {99.9, 9}, {99.99, 9}} {
		if got := percentile(bins, c.p); got != c.want {
			t.Errorf("p%g = %g µs, want %g", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %g, want 0", got)
	}
}

// The table has a row per job, a row per percentile of the latency jobs,
// and a column per process group of each server.
func TestRenderTable(t *testing.T) {
	servers := []server{
		{Name: "nvstripe", groups: []namedGroup{{name: "map"}, {name: "targets"}}},
		{Name: "nbdkit", groups: []namedGroup{{name: "nbdkit"}}},
	}
	totals := map[string]map[string]*total{}
	for _, j := range stackJobs {
		totals[j.Name] = map[string]*total{}
		for i, s := range servers {
			tt := &total{}
			cpu := map[string]float64{"fio": 0.5}
			for _, g := range s.groups {
				cpu[g.name] = 1
			}
			tt.add(fioRun{Bytes: 1 << 30, IOs: 1 << 18, Seconds: float64(i + 1), Bins: map[int64]int64{int64(10000 * (i + 1)): 5}}, cpu)
			totals[j.Name][s.Name] = tt
		}
	}
	res := tableResult{Config: runConfig{Size: 1 << 30}, Jobs: results(stackJobs, servers, totals)}
	if r := res.Jobs[0]; r.Ratio != 2 || r.Results["nvstripe"].CPUmsPerGiB["map"] != 1000 || r.Results["nbdkit"].MiBps != 512 {
		t.Fatalf("first job: %+v", r)
	}
	text := renderTable(res, servers)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	head := strings.Fields(lines[3])
	if want := "job unit nvstripe map targets fio nbdkit nbdkit fio ratio"; strings.Join(head, " ") != want {
		t.Fatalf("header %q, want %q", strings.Join(head, " "), want)
	}
	latencyJobs := 0
	for _, j := range stackJobs {
		if j.Latency {
			latencyJobs++
		}
		if !strings.Contains(text, j.Name) {
			t.Errorf("no row for %s", j.Name)
		}
	}
	if rows := len(lines) - 4; rows != len(stackJobs)+latencyJobs*len(percentiles) {
		t.Fatalf("%d rows, want %d:\n%s", rows, len(stackJobs)+latencyJobs*len(percentiles), text)
	}
	if !strings.Contains(text, "latency p99.99") || !strings.Contains(text, "0.50") {
		t.Fatalf("no p99.99 row or no latency ratio 0.50 (10 µs over 20 µs):\n%s", text)
	}
}

// A 1 MiB job measured beside its copy floor gets two rows more: the
// floor's figures (summed over rounds, weighted by GiB) and the stack's
// CPU over them.
func TestFloorRows(t *testing.T) {
	servers := []server{
		{Name: "nvstripe", groups: []namedGroup{{name: "map"}, {name: "targets"}}},
		{Name: "nbdkit", groups: []namedGroup{{name: "nbdkit"}}},
	}
	j := stackJobs[0]
	totals := map[string]map[string]*total{j.Name: {}}
	for _, s := range servers {
		tt := &total{}
		tt.add(fioRun{Bytes: 1 << 30, IOs: 1024, Seconds: 1}, map[string]float64{"fio": 0.5, "map": 1.5, "targets": 2, "nbdkit": 0.3})
		totals[j.Name][s.Name] = tt
	}
	jobs := results([]job{j}, servers, totals)
	ft := &floorTotal{}
	ft.add(floorRun{GiB: 2, MiBps: 1024, ClientMs: 500, SinksMs: 1000, PeerMs: 100})
	ft.add(floorRun{GiB: 2, MiBps: 512, ClientMs: 1000, SinksMs: 1000, PeerMs: 300})
	addFloors(jobs, map[string]*floorTotal{j.Name: ft})
	f := jobs[0].Floor
	if f == nil || f.MapMs != 750 || f.TargetsMs != 1000 || f.FioMs != 200 || f.MiBps != 4*1024/6.0 || f.MapOver != 2 || f.TargetsOver != 2 {
		t.Fatalf("floor %+v: want 750 and 1000 ms/GiB, 683 MiB/s, the stack at 2x both", f)
	}
	text := renderTable(tableResult{Config: runConfig{Size: 1 << 30}, Jobs: jobs}, servers)
	if !strings.Contains(text, "copy floor") || !strings.Contains(text, "over the floor") || !strings.Contains(text, "2.00") {
		t.Fatalf("no floor rows:\n%s", text)
	}
	if lines := strings.Split(strings.TrimSpace(text), "\n"); len(lines) != 4+3 {
		t.Fatalf("%d lines, want the header, the job and its two floor rows:\n%s", len(lines), text)
	}
}

// The volume without the write log runs only the write jobs: its columns
// are blank for the others, and each write job gets the log's cost.
func TestLogCostRows(t *testing.T) {
	servers := []server{
		{Name: "nvstripe", groups: []namedGroup{{name: "map"}, {name: "targets"}}},
		{Name: noLogName, groups: []namedGroup{{name: "map"}, {name: "targets"}}, only: job.write},
		{Name: "nbdkit", groups: []namedGroup{{name: "nbdkit"}}},
	}
	totals := map[string]map[string]*total{}
	for _, j := range stackJobs {
		totals[j.Name] = map[string]*total{}
		for i, s := range servers {
			if !s.runs(j) {
				continue
			}
			tt := &total{}
			tt.add(fioRun{Bytes: 1 << 30, IOs: 1 << 18, Seconds: 1, Bins: map[int64]int64{10000: 1}}, map[string]float64{"fio": 1, "map": float64(3 - i), "targets": 2, "nbdkit": 1})
			totals[j.Name][s.Name] = tt
		}
	}
	jobs := results(stackJobs, servers, totals)
	for _, jr := range jobs {
		c := jr.LogCost
		switch {
		case !jr.write() && c != nil:
			t.Errorf("%s: a log cost without a no-log run: %+v", jr.Name, c)
		case jr.write() && (c == nil || c.Throughput != 1 || c.MapCPU != 1.5 || c.TargetsCPU != 1 || c.StackCPU != 5.0/4):
			t.Errorf("%s: log cost %+v, want throughput 1, map 1.5, targets 1, both 1.25", jr.Name, c)
		}
	}
	text := renderTable(tableResult{Config: runConfig{Size: 1 << 30}, Jobs: jobs}, servers)
	if n := strings.Count(text, "log / no log"); n != 3 {
		t.Fatalf("%d log cost rows, want one per write job (3):\n%s", n, text)
	}
}
