package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvstripe/nvstripe/internal/table"
)

// The noisy-neighbour jobs: the victim reads 4 KiB at QD1 while the
// neighbour writes 1 MiB at QD64, both through their own map of their own
// volume on the same six targets.
var (
	victimJob    = job{Name: "victim randread 4KiB QD1", RW: "randread", BS: "4k", QD: 1, Small: true, Latency: true}
	neighbourJob = job{Name: "neighbour write 1MiB QD64", RW: "write", BS: "1M", QD: 64}
)

// phase is the victim alone or beside one neighbour.
type phase struct {
	Name      string   `json:"name"`
	neighbour *mapping // nil: alone
}

// noisyResult is the JSON of the noisy-neighbour table.
type noisyResult struct {
	Config runConfig     `json:"config"`
	Phases []phaseResult `json:"phases"`
}

type phaseResult struct {
	Name           string             `json:"name"`
	VictimIOPS     float64            `json:"victim_iops"`
	VictimLatency  map[string]float64 `json:"victim_latency_us"`
	NeighbourMiBps float64            `json:"neighbour_mib_per_s,omitempty"`
	// P99VsAlone is the victim's p99 over its p99 alone.
	P99VsAlone float64 `json:"p99_vs_alone"`
}

// runNoisy creates the victim and neighbour volumes, maps each, and runs
// the phases for the rounds, interleaved.
func runNoisy(ctx context.Context, o options, c *cluster) error {
	vols := []struct{ name, flags string }{{"victim", ""}, {"neighbour", ""}}
	if o.neighbourFlags != "" {
		vols = append(vols, struct{ name, flags string }{"neighbour-qos", o.neighbourFlags})
	}
	maps := map[string]*mapping{}
	for _, v := range vols {
		if err := c.createVolume(v.name, fmt.Sprint(o.size), strings.Fields(v.flags)...); err != nil {
			return err
		}
		m, err := c.mapVolume(v.name)
		if err != nil {
			return err
		}
		maps[v.name] = m
	}
	phases := []phase{{Name: "alone"}, {Name: "neighbour unlimited", neighbour: maps["neighbour"]}}
	if m := maps["neighbour-qos"]; m != nil {
		phases = append(phases, phase{Name: "neighbour " + o.neighbourFlags, neighbour: m})
	}
	victim := device{uri: maps["victim"].uri}
	fmt.Fprintln(os.Stderr, "bench-stack: filling the victim")
	if _, err := runFio(ctx, fioArgs(job{Name: "fill", RW: "write", BS: "1M", QD: 16}, victim, o.size, 0), ""); err != nil {
		return err
	}
	victims, neighbours := make([]total, len(phases)), make([]total, len(phases))
	for round := range o.rounds {
		for i, p := range phases {
			fmt.Fprintf(os.Stderr, "bench-stack: round %d/%d: victim %s\n", round+1, o.rounds, p.Name)
			keep := filepath.Join(o.out, "fio", fmt.Sprintf("noisy-%d-%d", i, round+1))
			v, n, err := runPhase(ctx, o, victim, p.neighbour, keep)
			if err != nil {
				return err
			}
			victims[i].add(v, nil)
			neighbours[i].add(n, nil)
		}
	}
	res := noisyResult{Config: describe(o)}
	for i, p := range phases {
		r := phaseResult{Name: p.Name, VictimIOPS: float64(victims[i].ios) / victims[i].seconds, VictimLatency: map[string]float64{}}
		for _, pct := range percentiles {
			r.VictimLatency[pctName(pct)] = percentile(victims[i].bins, pct)
		}
		if neighbours[i].seconds > 0 {
			r.NeighbourMiBps = float64(neighbours[i].bytes) / (1 << 20) / neighbours[i].seconds
		}
		r.P99VsAlone = ratio(r.VictimLatency["p99"], percentile(victims[0].bins, 99))
		res.Phases = append(res.Phases, r)
	}
	return save(o, res, renderNoisy(res))
}

// runPhase runs the victim for the runtime, beside the neighbour when
// there is one: the neighbour runs two seconds longer and the victim
// starts one second after it.
func runPhase(ctx context.Context, o options, victim device, neighbour *mapping, keep string) (fioRun, fioRun, error) {
	if neighbour == nil {
		v, err := runFio(ctx, fioArgs(victimJob, victim, o.size, o.runtime), keep+"-victim.json")
		return v, fioRun{}, err
	}
	type result struct {
		r   fioRun
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := runFio(ctx, fioArgs(neighbourJob, device{uri: neighbour.uri}, o.size, o.runtime+2), keep+"-neighbour.json")
		done <- result{r, err}
	}()
	v, err := runFio(ctx, append(fioArgs(victimJob, victim, o.size, o.runtime), "--startdelay=1"), keep+"-victim.json")
	n := <-done
	if err == nil {
		err = n.err
	}
	return v, n.r, err
}

// renderNoisy prints the noisy-neighbour table.
func renderNoisy(res noisyResult) string {
	var b strings.Builder
	cfg := res.Config
	fmt.Fprintf(&b, "bench-stack noisy neighbour %s, code %s, %d CPUs, load %s; volumes %s; size %s, fio %ds per phase, %d rounds interleaved (sums)\n",
		cfg.Time, cfg.Code, cfg.CPUs, cfg.Load, cfg.Volume, fmtSize(cfg.Size), cfg.Runtime, cfg.Rounds)
	fmt.Fprintf(&b, "victim: %s; neighbour: %s; latency in µs\n\n", victimJob.Name[len("victim "):], neighbourJob.Name[len("neighbour "):])
	w := table.NewRight(&b)
	head := []string{"phase", "victim IOPS"}
	for _, p := range percentiles {
		head = append(head, pctName(p))
	}
	fmt.Fprintln(w, strings.Join(append(head, "neighbour MiB/s", "p99 vs alone"), "\t")+"\t")
	for _, r := range res.Phases {
		row := []string{r.Name, fmt.Sprintf("%.0f", r.VictimIOPS)}
		for _, p := range percentiles {
			row = append(row, fmt.Sprintf("%.1f", r.VictimLatency[pctName(p)]))
		}
		neighbour := "-"
		if r.NeighbourMiBps > 0 {
			neighbour = fmt.Sprintf("%.0f", r.NeighbourMiBps)
		}
		fmt.Fprintln(w, strings.Join(append(row, neighbour, fmt.Sprintf("%.2f", r.P99VsAlone)), "\t")+"\t")
	}
	w.Flush()
	return b.String()
}
