package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/placement"
)

// chaosTimeout bounds the wait for the controller to notice a stopped
// target and for the rebuild to finish (a bound on a hang, not a promise).
const chaosTimeout = 5 * time.Minute

// chaos shows a storage host dying under a served volume, healed by the
// real machinery: it writes test data, stops a target holding shards, reads
// everything back degraded, then waits while the in-process controller (see
// startControl) notices the target is silent, marks its namespace down and
// then out, and hands the rebuild of each lost shard to the volume's owner
// (this demo's mapping) as a task record; the task records' progress is
// shown as it is written. At the end every segment must have k+m shards on
// k+m distinct hosts in service, and the data must verify.
func (d *demo) chaos(ctx context.Context) error {
	out := d.o.Out
	n := min(d.o.Size/2, 256<<20)
	data := make([]byte, n)
	rand.New(rand.NewSource(1)).Read(data)
	fmt.Fprintf(out, "chaos: writing %s of test data\n", units.FormatSize(n))
	if err := d.counted.WriteAt(ctx, data, 0); err != nil {
		return err
	}
	victim, err := d.victim(ctx)
	if err != nil {
		return err
	}
	t := d.targets[victim]
	ns := t.host + "-n1"
	t.stop()
	stopped := time.Now()
	fmt.Fprintf(out, "chaos: stopped target %d (%s, %s): its shards are gone\n", victim+1, t.host, t.addr())
	before := d.degraded.Load()
	if err := d.verify(ctx, data); err != nil {
		return fmt.Errorf("degraded read: %w", err)
	}
	fmt.Fprintf(out, "chaos: read %s back while degraded: identical (%d stripes reconstructed)\n", units.FormatSize(n), d.degraded.Load()-before)
	fmt.Fprintf(out, "chaos: waiting for the controller: %s down after %v of silence, out %v later, then rebuilt\n", ns, demoGrace, demoOutAfter)
	wctx, cancel := context.WithTimeout(ctx, chaosTimeout)
	defer cancel()
	if err := d.watchRebuild(wctx, ns, stopped); err != nil {
		return err
	}
	if err := d.checkRedundancy(ctx); err != nil {
		return err
	}
	if err := d.verify(ctx, data); err != nil {
		return fmt.Errorf("after rebuild: %w", err)
	}
	fmt.Fprintf(out, "chaos: redundancy restored %.1fs after the target stopped: every segment has %d shards on %d distinct hosts in service; data verified\n",
		time.Since(stopped).Seconds(), d.o.K+d.o.M, d.o.K+d.o.M)
	return nil
}

// victim returns the index of the target holding the most shards of the
// volume (the first such, in target order).
func (d *demo) victim(ctx context.Context) (int, error) {
	segs, _, err := d.mapped.Map.Segments(ctx)
	if err != nil {
		return 0, err
	}
	count := make([]int, len(d.targets))
	for _, rec := range segs {
		for _, sl := range rec.Slots {
			for i, t := range d.targets {
				if strings.HasPrefix(sl.NS, t.host+"-") {
					count[i]++
				}
			}
		}
	}
	best := 0
	for i, n := range count {
		if n > count[best] {
			best = i
		}
	}
	if count[best] == 0 {
		return 0, fmt.Errorf("no allocated segment")
	}
	return best, nil
}

func (d *demo) verify(ctx context.Context, want []byte) error {
	got := make([]byte, len(want))
	if err := d.counted.ReadAt(ctx, got, 0); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("data differs from what was written")
	}
	return nil
}

// rebuildWatch is what watchRebuild has seen and printed so far.
type rebuildWatch struct {
	state   string                // namespace state last printed
	lost    int                   // shards on the namespace when it went out
	left    int                   // shards still on it
	tasks   map[string]moves.Task // last progress printed, by task ID
	ended   map[string]bool       // tasks whose record went away
	started time.Time             // when the target stopped
}

// watchRebuild polls metadata (the controller's view: namespace states,
// segment records, task records) and prints the namespace's state changes
// and each task's progress until the namespace is out, no shard is left on
// it and no move or task remains.
func (d *demo) watchRebuild(ctx context.Context, ns string, stopped time.Time) error {
	w := &rebuildWatch{tasks: map[string]moves.Task{}, ended: map[string]bool{}, started: stopped}
	tick := time.NewTicker(demoInterval)
	defer tick.Stop()
	for {
		snap, err := controller.LoadSnapshot(ctx, d.store)
		if err == nil {
			if d.report(w, snap, ns) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("rebuild of %s not done (namespace %s): %w", ns, w.state, ctx.Err()), err)
		case <-tick.C:
		}
	}
}

// report prints what changed in snap and reports whether the rebuild is
// over.
func (d *demo) report(w *rebuildWatch, snap *controller.Snapshot, ns string) bool {
	out := d.o.Out
	rec := snap.Namespaces[ns]
	if rec == nil {
		return false
	}
	left, moving := 0, 0
	for _, s := range snap.Segments[d.o.Name] {
		for _, sl := range s.Slots {
			if sl.NS == ns {
				left++
			}
		}
		if s.Move != nil {
			moving++
		}
	}
	if rec.State != w.state {
		w.state = rec.State
		fmt.Fprintf(out, "chaos: controller marked %s %s (%.1fs after the target stopped; shards on it: %d)\n",
			ns, rec.State, time.Since(w.started).Seconds(), left)
		if rec.State == placement.StateOut.String() {
			w.lost = left
		}
	}
	w.left = left
	d.reportTasks(w, snap)
	over := rec.State == placement.StateOut.String() && left == 0 && moving == 0 && len(snap.Tasks) == 0
	if over {
		fmt.Fprintf(out, "rebuild: [%s] %d/%d shards rebuilt\n", strings.Repeat("#", 20), w.lost, w.lost)
	}
	return over
}

// reportTasks prints one progress line per move task whose progress changed,
// and one when a task ends (its record goes away).
func (d *demo) reportTasks(w *rebuildWatch, snap *controller.Snapshot) {
	seen := map[string]bool{}
	for _, t := range snap.MoveTasks {
		id := moves.TaskID(t.Segment)
		seen[id] = true
		last, ok := w.tasks[id]
		if ok && last.Done == t.Done && last.State == t.State {
			continue
		}
		w.tasks[id] = t
		d.progressLine(w, t)
	}
	for id, t := range w.tasks {
		if !seen[id] && !w.ended[id] {
			w.ended[id] = true
			if t.State == meta.TaskRunning { // finished between two looks
				t.State, t.Done = meta.TaskDone, t.Total
				d.progressLine(w, t)
			}
		}
	}
}

// progressLine prints one task's progress with a bar of the whole rebuild
// (shards moved off the lost namespace so far).
func (d *demo) progressLine(w *rebuildWatch, t moves.Task) {
	moved := max(w.lost-w.left, 0)
	bar := strings.Repeat("#", 20*moved/max(w.lost, 1))
	what := "starting"
	if t.Total > 0 {
		what = fmt.Sprintf("%5.1f%% of %s", 100*float64(t.Done)/float64(t.Total), units.FormatSize(t.Total))
	}
	if t.Err != "" {
		t.State += ": " + t.Err
	}
	fmt.Fprintf(d.o.Out, "rebuild: [%-20s] %d/%d shards | %s of segment %d shard %d by %s, %s -> %s: %s (%s)\n",
		bar, moved, w.lost, t.Kind, t.Segment.Index, t.Shard, t.Holder, t.From, t.To, what, t.State)
}

// checkRedundancy checks, from metadata, that every segment of the volume
// has k+m shards on distinct hosts whose namespaces are in service, and no
// move in flight.
func (d *demo) checkRedundancy(ctx context.Context) error {
	segs, _, err := d.mapped.Map.Segments(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for idx, rec := range segs {
		hosts := map[string]bool{}
		for _, sl := range rec.Slots {
			n, err := d.store.Namespace(ctx, sl.NS)
			if err != nil {
				return err
			}
			if n.State != placement.StateIn.String() || hosts[n.Host] {
				errs = append(errs, fmt.Errorf("segment %d: shard on %s (host %s, %s) is not in service or repeats a host", idx, sl.NS, n.Host, n.State))
			}
			hosts[n.Host] = true
		}
		if len(hosts) != d.o.K+d.o.M || rec.Move != nil {
			errs = append(errs, fmt.Errorf("segment %d: %d distinct hosts, move in flight %v", idx, len(hosts), rec.Move != nil))
		}
	}
	return errors.Join(errs...)
}
