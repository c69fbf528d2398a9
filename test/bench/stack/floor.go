package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
)

// floorGiB is how much volume data each floor measurement moves: a few
// seconds' worth on 2 cores.
const floorGiB = 2

// floorRun is one run of test/bench/floor (its JSON result).
type floorRun struct {
	GiB      float64 `json:"gib"`
	MiBps    float64 `json:"mib_per_s"`
	ClientMs float64 `json:"client_cpu_ms_per_gib"`
	SinksMs  float64 `json:"sinks_cpu_ms_per_gib"`
	PeerMs   float64 `json:"source_cpu_ms_per_gib"`
}

// floorTotal is a job's floor runs summed over the rounds.
type floorTotal struct {
	gib, seconds, client, sinks, peer float64 // GiB, wall seconds, CPU ms
}

func (t *floorTotal) add(r floorRun) {
	t.gib += r.GiB
	t.seconds += r.GiB * 1024 / r.MiBps
	t.client += r.ClientMs * r.GiB
	t.sinks += r.SinksMs * r.GiB
	t.peer += r.PeerMs * r.GiB
}

// floorResult is the copy floor beside a 1 MiB job: the same traffic
// (1.5 bytes to six sockets per byte read from one, or 1 byte from
// four per byte sent) with crc32c and Reed-Solomon, and the targets'
// one copy into memory, but no protocol, no hand-offs between
// goroutines and one process per side; and the stack over it.
type floorResult struct {
	MiBps       float64 `json:"mib_per_s"`
	MapMs       float64 `json:"map_cpu_ms_per_gib"`     // the floor's client
	TargetsMs   float64 `json:"targets_cpu_ms_per_gib"` // the floor's sinks
	FioMs       float64 `json:"fio_cpu_ms_per_gib"`     // the floor's source or consumer
	MapOver     float64 `json:"map_over_floor"`
	TargetsOver float64 `json:"targets_over_floor"`
}

// measureFloor runs the floor beside job j in this round (-floor, 1 MiB
// sequential jobs only) and adds it to floors.
func measureFloor(ctx context.Context, o options, j job, round int, floors map[string]*floorTotal) error {
	if o.floor == "" || j.BS != "1M" || (j.RW != "write" && j.RW != "read") {
		return nil
	}
	fmt.Fprintf(os.Stderr, "bench-stack: round %d/%d: %s, copy floor\n", round+1, o.rounds, j.Name)
	out, err := exec.CommandContext(ctx, o.floor, "-pattern", j.RW, "-gib", fmt.Sprint(floorGiB), "-codec", "-sink-copy", "-o", "json").Output()
	if err != nil {
		return fmt.Errorf("copy floor of %s: %w", j.Name, err)
	}
	var runs []floorRun
	if err := json.Unmarshal(out, &runs); err != nil || len(runs) != 1 {
		return fmt.Errorf("copy floor of %s: unexpected output %q", j.Name, out)
	}
	if floors[j.Name] == nil {
		floors[j.Name] = &floorTotal{}
	}
	floors[j.Name].add(runs[0])
	return nil
}

// addFloors puts each job's floor, and the stack's CPU over it, into
// its result.
func addFloors(jobs []jobResult, floors map[string]*floorTotal) {
	for i := range jobs {
		t := floors[jobs[i].Name]
		if t == nil || t.gib == 0 {
			continue
		}
		f := &floorResult{MiBps: t.gib * 1024 / t.seconds, MapMs: t.client / t.gib, TargetsMs: t.sinks / t.gib, FioMs: t.peer / t.gib}
		stack := jobs[i].Results["nvstripe"].CPUmsPerGiB
		f.MapOver, f.TargetsOver = ratio(stack["map"], f.MapMs), ratio(stack["targets"], f.TargetsMs)
		jobs[i].Floor = f
	}
}
