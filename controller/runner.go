package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/placement"
)

// Mover carries out moves of volumes nobody has mapped. It takes the
// volume's read-write ownership under RunnerConfig.Holder (several moves of
// one volume may run at once and must share it), settles interrupted moves
// when it opens the volume, and runs the crash-safe sequence BeginMove, copy,
// CommitMove, FinishMove (AbortMove on failure). volclient.TaskMover is the
// implementation `nvstripe controller` uses.
type Mover interface {
	MoveShard(ctx context.Context, req moves.Request) error
}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	// Store is the cluster's metadata. Required.
	Store *meta.Store
	// Holder names this controller (leader key, task holder, volume owner).
	// Required; unique among controllers.
	Holder string
	// Decide tunes the decisions.
	Decide decide.Config
	// Interval is the time between ticks. Default 1s.
	Interval time.Duration
	// LeaderTTL is the leadership lease's TTL. Default 10s.
	LeaderTTL time.Duration
	// Mover moves data of volumes without an owner. Default nil: such
	// moves wait until someone maps the volume.
	Mover Mover
	// Pacer paces this controller's own moves. Default nil: unpaced.
	Pacer *moves.Pacer
	// Gossip, when set, carries the membership events of this controller's
	// health.Node (see Gossip): a host with a target member in the gossip
	// pool is judged by gossip alone, from the first event about it on.
	// Default nil: no gossip.
	Gossip *Gossip
	// Probe reports whether a namespace answers (a host is alive when one
	// of its namespaces does); it judges the hosts gossip does not. Default
	// nil: hosts without gossip are not tracked, their namespace states
	// come from metadata only. ProbeTCP dials the paths.
	Probe func(ctx context.Context, ns *meta.NamespaceRecord) bool
	// Health tunes the liveness tracker (Grace, flapping). Its OutAfter is
	// unused: Decide.OutAfter marks namespaces out.
	Health health.TrackerConfig
	// ProgressEvery is the least time between progress writes of a
	// task. Default 500ms.
	ProgressEvery time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logf receives one line per event. Default: discarded.
	Logf func(format string, args ...any)
	// OnMove hears the moves the controller carries out itself start and
	// end (moves.Log logs them). Default nil.
	OnMove func(moves.Event)
}

// Defaults of RunnerConfig.Interval and LeaderTTL.
const (
	DefaultInterval  = time.Second
	DefaultLeaderTTL = 10 * time.Second
)

func (c *RunnerConfig) ensureDefaults() error {
	if c.Store == nil || c.Holder == "" {
		return fmt.Errorf("runner: Store and Holder are required: %w", decide.ErrInvalid)
	}
	c.Decide.EnsureDefaults()
	if err := c.Decide.Validate(); err != nil {
		return err
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.LeaderTTL <= 0 {
		c.LeaderTTL = DefaultLeaderTTL
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 500 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// Runner is the controller daemon's loop: it campaigns for leadership and,
// while it leads, reads the cluster from metadata every Interval, calls
// Decide and carries the Actions out (see Action). It stops acting the moment
// leadership is lost: its moves are cancelled (they roll back) and it
// campaigns again. State it keeps between ticks (when a namespace changed
// state, when a move last progressed) only refines timing; a new leader
// rebuilds it from metadata and the clock.
type Runner struct {
	cfg RunnerConfig

	mu      sync.Mutex
	leading bool
	running map[decide.SegmentID]*running
	nsSeen  map[string]nsSeen
	mvSeen  map[decide.SegmentID]mvSeen
	wg      sync.WaitGroup

	// Owned by the loop (lead and Tick), reset when leadership starts.
	tracker      *health.Tracker
	gossipHosts  map[string]map[string]bool // host -> its target members -> alive
	gossipResume bool                       // the next tick starts from Gossip.resume
	observed     time.Time                  // the latest time given to the tracker
	heldNoted    map[string]string          // volume -> why it is held back, as logged
	holdNoted    string                     // the HoldOut last logged ("" none since)
	backoff      map[string]volBackoff      // volumes whose moves wait, by volume; REQUIRES: mu held
	repairing    map[string]bool            // volumes whose stale slots the Mover repairs now; REQUIRES: mu held
	repairWait   map[string]volBackoff      // volumes whose stale slots outlived a repair; REQUIRES: mu held
}

type running struct {
	cancel context.CancelFunc
	task   moves.Task
	wrote  time.Time
}

type nsSeen struct {
	state placement.State
	since time.Time
}

type mvSeen struct {
	shard   int
	done    int64
	started time.Time
	updated time.Time
}

// NewRunner checks cfg and returns a Runner.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if err := cfg.ensureDefaults(); err != nil {
		return nil, err
	}
	if _, err := health.NewTracker(cfg.Health); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg}, nil
}

// Leading reports whether the runner leads now.
func (r *Runner) Leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leading
}

// Run campaigns and leads until ctx ends; then it resigns and returns nil.
func (r *Runner) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		lead, err := r.cfg.Store.Campaign(ctx, r.cfg.Holder, r.cfg.LeaderTTL)
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logf("campaign: %v", err)
				_ = retry.Sleep(ctx, r.cfg.Interval)
			}
			continue
		}
		r.cfg.Logf("%s leads", r.cfg.Holder)
		r.lead(ctx, lead.Context())
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = lead.Resign(rctx)
		cancel()
		r.cfg.Logf("%s stopped leading", r.cfg.Holder)
	}
	return nil
}

// lead ticks until leadership or ctx ends, then cancels its moves and waits
// for them.
func (r *Runner) lead(ctx, leadCtx context.Context) {
	lctx, cancel := context.WithCancel(leadCtx)
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	r.begin()
	if n, err := MigrateTasks(lctx, r.cfg.Store); err != nil {
		r.cfg.Logf("migrating task records of older builds: %v", err)
	} else if n > 0 {
		r.cfg.Logf("rewrote %d task records of older builds in the typed form", n)
	}
	for lctx.Err() == nil {
		if err := r.Tick(lctx); err != nil && lctx.Err() == nil {
			r.cfg.Logf("tick: %v", err)
		}
		_ = retry.Sleep(lctx, r.cfg.Interval)
	}
	cancel()
	r.wg.Wait()
	r.mu.Lock()
	r.leading = false
	r.mu.Unlock()
}

// begin starts leading afresh: what the runner keeps between ticks is reset.
func (r *Runner) begin() {
	tr, _ := health.NewTracker(r.cfg.Health)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leading, r.tracker = true, tr
	r.gossipHosts, r.gossipResume, r.observed = map[string]map[string]bool{}, true, time.Time{}
	r.backoff, r.heldNoted = map[string]volBackoff{}, map[string]string{}
	r.repairing, r.repairWait = map[string]bool{}, map[string]volBackoff{}
	r.running, r.nsSeen, r.mvSeen = map[decide.SegmentID]*running{}, map[string]nsSeen{}, map[decide.SegmentID]mvSeen{}
}

// Tick runs one round: read, judge liveness (gossip, probes), clean up,
// decide, act, and start repairs of stale slots of unmapped volumes. Run
// calls it while leading; ctx must end when leadership does.
func (r *Runner) Tick(ctx context.Context) error {
	mine := r.ownMoves() // before the snapshot: see cleanup
	snap, err := LoadSnapshot(ctx, r.cfg.Store)
	if err != nil {
		return err
	}
	now := r.cfg.Now()
	if r.cfg.Probe != nil || r.cfg.Gossip != nil {
		r.liveness(ctx, snap, now)
	}
	r.fill(snap, now)
	r.cleanup(ctx, snap, mine)
	acts, err := decide.Decide(r.holdBack(snap, now), now, r.cfg.Decide)
	if err != nil {
		return err
	}
	var errs []error
	if !slices.ContainsFunc(acts, func(a decide.Action) bool { _, ok := a.(decide.HoldOut); return ok }) {
		r.holdNoted = ""
	}
	for _, a := range acts {
		if ctx.Err() != nil {
			break
		}
		if err := r.do(ctx, snap, a, now); err != nil {
			errs = append(errs, fmt.Errorf("%v: %w", a, err))
		}
	}
	if ctx.Err() == nil {
		r.repairStale(ctx, snap, now)
	}
	return errors.Join(errs...)
}

// fill completes State with the times the runner has seen: when each
// namespace entered its state, when each move started and last progressed.
func (r *Runner) fill(snap *Snapshot, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range snap.State.Namespaces {
		n := &snap.State.Namespaces[i]
		s, ok := r.nsSeen[n.ID]
		if !ok || s.state != n.State {
			s = nsSeen{state: n.State, since: now}
			r.nsSeen[n.ID] = s
		}
		n.Since = s.since
	}
	for i := range snap.State.Segments {
		s := &snap.State.Segments[i]
		if s.Move == nil {
			delete(r.mvSeen, s.ID)
			continue
		}
		m, ok := r.mvSeen[s.ID]
		if !ok || m.shard != s.Move.Shard {
			m = mvSeen{shard: s.Move.Shard, done: s.Move.Done, started: now, updated: now}
		} else if s.Move.Done != m.done {
			m.done, m.updated = s.Move.Done, now
		}
		r.mvSeen[s.ID] = m
		if s.Move.Started.IsZero() {
			s.Move.Started = m.started
		}
		s.Move.Updated = m.updated
	}
}
