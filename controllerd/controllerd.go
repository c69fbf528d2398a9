// Package controllerd is the controller daemon (`nvstripe controller`) as a
// library: it composes the controller's Runner (package controller) with the
// mover that opens unmapped volumes (volclient.TaskMover), a Prometheus
// metrics listener whose collector reads the cluster from etcd at each
// scrape, its member of the health gossip pool and the gRPC admin API, so that a test can start the daemon in-process. Flags are
// the command line's flags and defaults (AddFlags); the command line turns
// them into Options (Flags.Options), calls New and Run, and prints.
//
// Concurrency: a Daemon's methods are safe for concurrent use; Close is
// idempotent.
package controllerd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/health/pool"
	"github.com/nvstripe/nvstripe/internal/metricshttp"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient"
)

// Options configure a controller daemon.
type Options struct {
	// Runner configures the controller. Store is required. Holder
	// defaults to controller.HOSTNAME, the host name cleaned into a name
	// etcd takes (meta.HostHolder). Decide.DomainLabel defaults to the
	// cluster's. Mover defaults to a volclient.TaskMover that opens
	// volumes as Holder, with an ownership lease of LeaderTTL, connecting
	// as HostNQN.
	Runner controller.RunnerConfig
	// HostNQN is the NVMe host NQN the default mover connects as. Default
	// initiator.DefaultHostNQN.
	HostNQN string
	// DHCHAPSecret and DHCHAPCtrlSecret authenticate the default mover's
	// connections to targets that require it (initiator.Options).
	DHCHAPSecret, DHCHAPCtrlSecret string
	// TLSKey runs the default mover's connections over NVMe/TCP TLS
	// (initiator.Options.TLSKey).
	TLSKey string
	// HostTraddr is the local IP address the default mover's connections
	// to targets leave from (volclient.NamespaceOptions.HostTraddr); a
	// bad one fails New. Default "": the kernel picks by route.
	HostTraddr string
	// MetricsAddr is HOST:PORT of the Prometheus metrics listener (port 0:
	// any). Default "": none.
	MetricsAddr string
	// ScrubInterval is how often every checksummed volume mapped
	// read-write is scrubbed by its owner (scrub.go). Every controller
	// checks, every tenth of it (at most an hour); a scrub starts once
	// however many do. Default 0: never; otherwise at least
	// MinScrubInterval (New refuses less, and negative values).
	ScrubInterval time.Duration
	// Gossip, when Gossip.Addr is set, puts the daemon in the health
	// gossip pool (Runner.Gossip, from Settings.Gossip, takes its events)
	// as host GossipHost (default: the machine's host name), registered in
	// the store. Mistakes in it are pool.ErrSpec.
	Gossip     pool.Spec
	GossipHost string
	// AdminAddr, when set, serves the gRPC admin API there (admin.Listen,
	// with AdminTLS for a TCP address).
	AdminAddr string
	AdminTLS  admin.TLSFiles
}

// MinScrubInterval is the shortest Options.ScrubInterval New takes but 0:
// the schedule's ticker runs at a tenth of it, and each check reads every
// volume from etcd.
const MinScrubInterval = time.Second

// checkScrubInterval says why d cannot be Options.ScrubInterval (class
// ErrSettings).
func checkScrubInterval(d time.Duration) error {
	if d == 0 || d >= MinScrubInterval {
		return nil
	}
	return fmt.Errorf("controller: ScrubInterval %v: give %v or more, or 0 for no scheduled scrubs: %w", d, MinScrubInterval, ErrSettings)
}

// Daemon is a controller daemon: its Runner and its metrics listener.
type Daemon struct {
	runner *controller.Runner
	holder string
	store  *meta.Store
	scrub  time.Duration // Options.ScrubInterval
	// scrubCheck is how often the scrub schedule checks; scrubPasses
	// counts its checks (tests wait on it).
	scrubCheck  time.Duration
	scrubPasses atomic.Int64
	logf        func(string, ...any)
	gossip      *pool.Member // nil without one
	admin       string       // admin API address, "" without one
	stopAPI     func()       // stops the admin API; nil without one

	metrics   *metricshttp.Server // nil without one
	closeOnce sync.Once
}

// New builds the daemon and starts its metrics listener; Run runs it.
func New(ctx context.Context, o Options) (*Daemon, error) {
	cfg := o.Runner
	if cfg.Store == nil {
		return nil, fmt.Errorf("controller: no store: %w", meta.ErrInvalid)
	}
	if err := checkScrubInterval(o.ScrubInterval); err != nil {
		return nil, err
	}
	nso := volclient.NamespaceOptions{HostNQN: o.HostNQN, DHCHAPSecret: o.DHCHAPSecret, DHCHAPCtrlSecret: o.DHCHAPCtrlSecret,
		TLSKey: o.TLSKey, HostTraddr: o.HostTraddr}
	if err := nso.Check(); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	host, _ := os.Hostname() // "" where unset: meta.HostHolder then names the machine by its ids
	if err := defaults(ctx, &cfg, nso, host); err != nil {
		return nil, err
	}
	r, err := controller.NewRunner(cfg)
	if err != nil {
		return nil, err
	}
	d := &Daemon{runner: r, holder: cfg.Holder, store: cfg.Store, scrub: o.ScrubInterval, scrubCheck: min(o.ScrubInterval/10, time.Hour), logf: cfg.Logf}
	if d.logf == nil {
		d.logf = func(string, ...any) {}
	}
	if err := d.listen(cfg, o); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// listen starts the metrics listener, the gossip member and the admin API
// that o asks for.
func (d *Daemon) listen(cfg controller.RunnerConfig, o Options) error {
	if o.MetricsAddr != "" {
		if err := d.serveMetrics(cfg.Store, o.MetricsAddr); err != nil {
			return err
		}
	}
	if o.Gossip.Addr != "" {
		if err := d.startGossip(cfg, o.Gossip, o.GossipHost); err != nil {
			return err
		}
	}
	if o.AdminAddr != "" {
		addr, stop, err := admin.Listen(cfg.Store, o.AdminAddr, o.AdminTLS)
		if err != nil {
			return err
		}
		d.admin, d.stopAPI = addr, stop
	}
	return nil
}

// startGossip puts the daemon in the gossip pool, its events feeding
// cfg.Gossip, and registers its address in the store.
func (d *Daemon) startGossip(cfg controller.RunnerConfig, spec pool.Spec, host string) error {
	if cfg.Gossip == nil {
		return fmt.Errorf("%w: gossip needs Runner.Gossip", ErrSettings)
	}
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil {
			return err
		}
	}
	hc, err := spec.Member(health.Meta{Role: health.RoleController, Host: host}, cfg.Holder)
	if err != nil {
		return err
	}
	hc.OnEvent = cfg.Gossip.OnEvent
	d.gossip, err = pool.Start(pool.Config{Health: hc, Join: spec.Join, Logf: cfg.Logf,
		Store: func(context.Context) (*meta.Store, error) { return cfg.Store, nil }})
	return err
}

// defaults fills the Runner options New documents, on host (the
// machine's host name).
func defaults(ctx context.Context, cfg *controller.RunnerConfig, nso volclient.NamespaceOptions, host string) error {
	if cfg.Holder == "" {
		cfg.Holder = meta.HostHolder("controller", host)
	}
	if cfg.Decide.DomainLabel == "" {
		cl, err := cfg.Store.Cluster(ctx)
		if err != nil {
			return err
		}
		cfg.Decide.DomainLabel = cl.DomainLabel
	}
	if cfg.Mover == nil {
		cfg.Mover = volclient.NewTaskMover(cfg.Store, volclient.OpenOptions{Holder: cfg.Holder, LeaseTTL: cfg.LeaderTTL,
			Namespaces: nso, Logf: cfg.Logf})
	}
	return nil
}

// The controller finds out by a type assertion that its mover also repairs
// stale slots: check here that volclient's does.
var _ controller.StaleRepairer = (*volclient.TaskMover)(nil)

// serveMetrics serves the metrics on addr.
func (d *Daemon) serveMetrics(s *meta.Store, addr string) error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(newCollector(s, d.runner, d.holder)); err != nil {
		return err
	}
	srv, err := metricshttp.Serve(addr, reg)
	if err != nil {
		return err
	}
	d.metrics = srv
	return nil
}

// Holder is the name the daemon campaigns and owns volumes under.
func (d *Daemon) Holder() string { return d.holder }

// Runner is the daemon's controller.
func (d *Daemon) Runner() *controller.Runner { return d.runner }

// MetricsURL is the URL of the metrics, or "" without a listener.
func (d *Daemon) MetricsURL() string {
	if d.metrics == nil {
		return ""
	}
	return d.metrics.URL()
}

// GossipAddr is the daemon's gossip address, or "" without gossip.
func (d *Daemon) GossipAddr() string {
	if d.gossip == nil {
		return ""
	}
	return d.gossip.Addr()
}

// AdminAddr is the admin API's address in the form admin.Dial takes, or ""
// without one.
func (d *Daemon) AdminAddr() string { return d.admin }

// Run campaigns for leadership and, while leading, reconciles the cluster,
// until ctx ends; then it closes the daemon.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.Close()
	if d.scrub > 0 {
		sctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer stop()
		// Every controller checks, leading or not: a scrub that is due
		// starts once however many do (scrub.go).
		wg.Go(func() { d.scheduleScrubs(sctx) })
	}
	return d.runner.Run(ctx)
}

// Close stops the admin API, leaves the gossip pool and stops the metrics
// listener.
func (d *Daemon) Close() error {
	var err error
	d.closeOnce.Do(func() {
		if d.stopAPI != nil {
			d.stopAPI()
		}
		if d.gossip != nil {
			d.gossip.Leave()
		}
		if d.metrics != nil {
			err = d.metrics.Close()
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
		}
	})
	return err
}
