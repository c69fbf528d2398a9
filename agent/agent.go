package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/internal/logging"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/volclient"
	"github.com/nvstripe/nvstripe/volume"
)

// Options configure an Agent. Zero fields take the defaults in their
// comments.
type Options struct {
	// Store reaches etcd. Required; the agent does not close it.
	Store *meta.Store
	// Holder names this agent as the owner of the volumes it maps.
	// Default meta.DefaultHolder("agent"): "agent.<hostname>", or
	// agent.node-ID on hosts whose name is unset or unusable.
	Holder string
	// StateDir holds the badger database of mappings to restore after a
	// restart. Default "": nothing is kept (a foreground `nvstripe map`).
	StateDir string
	// LeaseTTL is the ownership lease TTL: how long a volume stays owned, and
	// keeps being served with writes, while etcd cannot be reached.
	// Default meta's (10s).
	LeaseTTL time.Duration
	// Namespaces say how to reach namespaces.
	Namespaces volclient.NamespaceOptions
	// RecheckInterval is how often a mapping probes the namespaces its
	// volume treats as down, to use them again (OpenOptions.RecheckInterval).
	// Default 10s; negative is refused.
	RecheckInterval time.Duration
	// Report says when to report a namespace failed in etcd.
	Report ReportOptions
	// CleanInterval is how long a volume must see no write before its dirty
	// segments are marked clean (so that a crash leaves little to resync).
	// Default 30s; negative is refused.
	CleanInterval time.Duration
	// RetryInterval is the first delay between attempts to restore a
	// mapping after a restart; it doubles up to 30s. Default 1s.
	RetryInterval time.Duration
	// Pacer paces the shard moves (rebuild, drain, rebalance) the controller
	// gives this agent for the volumes it owns; foreground read and write
	// latency slows them down. Default: moves.PacerConfig's defaults; what
	// moves.NewPacer refuses, New refuses.
	Pacer moves.PacerConfig
	// Metrics receive the agent's metrics. Default NewMetrics().
	Metrics *Metrics
	// Events also receives every volume's events. Default: none.
	Events volume.EventListener
	// NBDTLS offers TLS (NBD_OPT_STARTTLS) on NBD listeners (not on kernel
	// nbd devices, which have no TLS); NBDRequireTLS refuses plain text.
	// Default nil: no TLS.
	NBDTLS        *tls.Config
	NBDRequireTLS bool
	// Logf receives one line per notable event. Default: Log's info
	// lines (logging.Logf), else discard.
	Logf func(format string, args ...any)
	// Log receives structured events: shard moves starting and ending, and
	// a warning (at most one a minute per volume) while a volume serves IO
	// degraded. Default: discard.
	Log *slog.Logger

	// sizePoll is how often a mapping reads its volume's record besides
	// watching it (resize.go). Default sizePollEvery.
	sizePoll time.Duration
	// records is where mappings read and watch their volume's record.
	// Default Store.
	records volumeRecords
}

// degradedWarnEvery is the least time between two warnings that a volume
// runs degraded.
const degradedWarnEvery = time.Minute

func (o *Options) ensureDefaults() {
	if o.Holder == "" {
		o.Holder = meta.DefaultHolder("agent") // valid on hosts without a valid hostname too
	}
	if o.CleanInterval == 0 {
		o.CleanInterval = 30 * time.Second
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = time.Second
	}
	if o.sizePoll == 0 {
		o.sizePoll = sizePollEvery
	}
	if o.records == nil && o.Store != nil {
		o.records = o.Store
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Logf == nil && o.Log != nil {
		o.Logf = logging.Logf(o.Log)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Namespaces.Logf == nil {
		o.Namespaces.Logf = o.Logf
	}
	if o.Namespaces.OnPathState == nil {
		o.Namespaces.OnPathState = o.Metrics.setPathState
	}
}

// checkDurations says why o's intervals cannot drive a mapping's tickers,
// or its report timeout bound an etcd update (negative: every report
// would fail at once), class api.ErrInvalid, before anything is mapped.
func (o *Options) checkDurations() error {
	var errs []error
	for _, iv := range []struct {
		name string
		d    time.Duration
		def  string
	}{{"CleanInterval", o.CleanInterval, "30s"}, {"RecheckInterval", o.RecheckInterval, "10s"}, {"Report.Timeout", o.Report.Timeout, "5s"}} {
		if iv.d < 0 {
			errs = append(errs, fmt.Errorf("%s %v: negative: give 0 (the default, %s) or more: %w", iv.name, iv.d, iv.def, api.ErrInvalid))
		}
	}
	return errors.Join(errs...)
}

// checkPacer says why o.Pacer cannot pace a mapping's moves: the rule
// moves.NewPacer applies as each mapping opens (class api.ErrInvalid).
func (o *Options) checkPacer() error {
	if _, err := moves.NewPacer(o.Pacer); err != nil {
		return fmt.Errorf("Pacer: %w: %w", err, api.ErrInvalid)
	}
	return nil
}

// Agent maps volumes on request, serves them over NBD or FUSE, holds their
// ownership leases, reports namespace media errors to etcd, exposes metrics,
// and restores its mappings after a restart. All methods are safe for
// concurrent use.
type Agent struct {
	o        Options
	warnDeg  func(volume string, attrs ...any) // rate-limited degraded warning
	metrics  *Metrics
	rep      *reporter
	state    *stateStore
	started  time.Time
	restored chan struct{}
	stopRep  context.CancelFunc
	repDone  chan struct{}

	mu          sync.Mutex
	closed      bool
	maps        map[string]*mapping
	metricsAddr string
}

// New starts an agent: it opens the state directory and starts restoring the
// mappings recorded there in the background (see Restored).
func New(ctx context.Context, o Options) (*Agent, error) {
	o.ensureDefaults()
	if o.Store == nil {
		return nil, fmt.Errorf("agent: a meta.Store is required: %w", api.ErrInvalid)
	}
	if err := errors.Join(o.Namespaces.Check(), o.checkDurations(), o.checkPacer()); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	st, err := openState(o.StateDir)
	if err != nil {
		return nil, err
	}
	specs, bad, err := st.specs()
	if err != nil {
		st.close()
		return nil, err
	}
	a := &Agent{o: o, warnDeg: logging.WarnEvery(o.Log, degradedWarnEvery, "volume runs degraded"), metrics: o.Metrics, state: st, started: time.Now(), restored: make(chan struct{}),
		maps: map[string]*mapping{}, repDone: make(chan struct{})}
	for _, e := range bad {
		a.logf("%v", e)
	}
	a.rep = newReporter(o.Store, o.Report, a.metrics, o.Logf)
	repCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	a.stopRep = stop
	go func() { defer close(a.repDone); a.rep.run(repCtx) }()
	a.restore(specs)
	return a, nil
}

func (a *Agent) logf(format string, args ...any) { a.o.Logf(format, args...) }

// restore starts a retry loop per persisted mapping; Restored is closed once
// each has made its first attempt.
func (a *Agent) restore(specs []Spec) {
	var wg sync.WaitGroup
	for _, sp := range specs {
		mp := newMapping(a, sp)
		mp.retryDone = make(chan struct{})
		a.maps[sp.Volume] = mp
		wg.Add(1)
		go mp.restore(wg.Done)
	}
	go func() { wg.Wait(); close(a.restored) }()
}

// Restored is closed once every mapping recorded in the state directory has
// been tried once (served, or retrying in the background).
func (a *Agent) Restored() <-chan struct{} { return a.restored }

// Metrics returns the agent's metrics.
func (a *Agent) Metrics() *Metrics { return a.metrics }

// Map takes ownership of spec.Volume, opens it and serves it as spec says,
// and records the mapping so that a restarted agent restores it. A volume is
// mapped at most once per agent (api.ErrExists).
func (a *Agent) Map(ctx context.Context, spec Spec) (*api.Mapping, error) {
	if err := CheckSpec(spec); err != nil {
		return nil, err
	}
	mp, err := a.reserve(spec)
	if err != nil {
		return nil, err
	}
	mp.opMu.Lock()
	err = mp.openLocked(ctx)
	var putErr error
	if err == nil {
		putErr = a.state.put(mp.currentSpec())
	}
	mp.opMu.Unlock()
	if putErr != nil {
		_, stopErr := mp.stop(ctx)
		err = errors.Join(putErr, stopErr)
	}
	if err != nil {
		a.drop(mp)
		return nil, fmt.Errorf("map %s: %w", spec.Volume, err)
	}
	return mp.info(), nil
}

// reserve adds a starting mapping for spec, refusing a second mapping of the
// volume or of the FUSE directory.
func (a *Agent) reserve(spec Spec) (*mapping, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, fmt.Errorf("map %s: agent is shutting down: %w", spec.Volume, api.ErrUnreachable)
	}
	if old, ok := a.maps[spec.Volume]; ok {
		i := old.info()
		return nil, fmt.Errorf("volume %s is already mapped by this agent (%s %s, %s): %w", spec.Volume, i.Via, i.Where, i.State, api.ErrExists)
	}
	if spec.Via != ViaNBDListen {
		for _, mp := range a.maps {
			if sp := mp.currentSpec(); sp.Via == spec.Via && sp.Where == spec.Where {
				return nil, fmt.Errorf("map %s: %s is already used by volume %s: %w", spec.Volume, spec.Where, sp.Volume, api.ErrBusy)
			}
		}
	}
	mp := newMapping(a, spec)
	a.maps[spec.Volume] = mp
	return mp, nil
}

// drop forgets a mapping that failed to start.
func (a *Agent) drop(mp *mapping) {
	a.mu.Lock()
	if a.maps[mp.name] == mp {
		delete(a.maps, mp.name)
	}
	a.mu.Unlock()
	a.metrics.forget(mp.name)
}

// Unmap stops serving a volume, flushes it, marks it clean, releases its
// lease and forgets the mapping. It fails, and keeps serving, while a FUSE
// file of it is in use. Once serving has stopped the mapping is forgotten
// even if flushing or releasing the lease failed (the error says so; the
// lease then expires after its TTL).
func (a *Agent) Unmap(ctx context.Context, name string) error {
	a.mu.Lock()
	mp := a.maps[name]
	a.mu.Unlock()
	if mp == nil {
		return fmt.Errorf("volume %s is not mapped by this agent: %w", name, api.ErrNotFound)
	}
	stopped, err := mp.stop(ctx)
	if !stopped {
		return err
	}
	a.drop(mp)
	return errors.Join(err, a.state.remove(name))
}

// mapped says whether volume name is mapped by a.
func (a *Agent) mapped(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.maps[name] != nil
}

// List describes every mapping, in volume-name order.
func (a *Agent) List() []*api.Mapping {
	a.mu.Lock()
	maps := make([]*mapping, 0, len(a.maps))
	for _, mp := range a.maps {
		maps = append(maps, mp)
	}
	a.mu.Unlock()
	out := make([]*api.Mapping, 0, len(maps))
	for _, mp := range maps {
		out = append(out, mp.info())
	}
	slices.SortFunc(out, func(x, y *api.Mapping) int { return strings.Compare(x.Volume, y.Volume) })
	return out
}

// WaitLost waits until ctx ends (nil) or the mapping of volume name is
// lost, with an error saying why: fenced for good (its lease was lost and
// it could not take the volume again: another owner took it meanwhile), or
// its kernel device was disconnected or stopped by someone else
// (ErrDetached). It checks every second. This is what a foreground
// `nvstripe map` waits for.
func (a *Agent) WaitLost(ctx context.Context, name string) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		a.mu.Lock()
		mp := a.maps[name]
		a.mu.Unlock()
		if mp == nil {
			continue
		}
		if err := mp.fencedForGood(); err != nil {
			return fmt.Errorf("volume %s fenced, no longer served: %w", name, err)
		}
		if err := mp.detached(); err != nil {
			return err
		}
	}
}

// Status describes the agent.
func (a *Agent) Status() *api.StatusReply {
	st := &api.StatusReply{Holder: a.o.Holder, Etcd: a.o.Store.Endpoints(), StateDir: a.o.StateDir,
		Started: timestamppb.New(a.started), Mappings: map[string]int64{}}
	for _, m := range a.List() {
		st.Mappings[m.State]++
	}
	a.mu.Lock()
	st.Metrics = a.metricsAddr
	a.mu.Unlock()
	return st
}

// Close stops serving every mapping (flush, clean, release the lease) but
// keeps them recorded, so that the next agent on this state directory
// restores them. It is idempotent.
func (a *Agent) Close(ctx context.Context) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	maps := make([]*mapping, 0, len(a.maps))
	for _, mp := range a.maps {
		maps = append(maps, mp)
	}
	a.mu.Unlock()
	errs := make([]error, len(maps))
	var wg sync.WaitGroup
	for i, mp := range maps {
		wg.Go(func() { _, errs[i] = mp.stop(ctx) })
	}
	wg.Wait()
	a.stopRep()
	<-a.repDone
	errs = append(errs, a.state.close())
	return errors.Join(errs...)
}
