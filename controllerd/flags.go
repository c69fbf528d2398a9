package controllerd

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/health/pool"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
	"github.com/nvstripe/nvstripe/volclient"
)

// DefaultSettings are the settings of a controller given no flags: the
// libraries' own defaults (decide.Config, moves.PacerConfig, controller.RunnerConfig,
// health.TrackerConfig), with TCP probes of a second.
func DefaultSettings() Settings {
	var dc decide.Config
	dc.EnsureDefaults()
	var pacer moves.PacerConfig
	pacer.EnsureDefaults()
	var tracker health.TrackerConfig
	tracker.EnsureDefaults()
	return Settings{Bandwidth: pacer.Bandwidth, OutAfter: dc.OutAfter, Interval: controller.DefaultInterval, Grace: tracker.Grace,
		ProbeTimeout: time.Second, LeaderTTL: controller.DefaultLeaderTTL, MaxMoves: dc.MaxMoves, MaxMovesPerNS: dc.MaxMovesPerNS,
		MinUp: dc.MinUpFraction, Probe: true}
}

// Flags are the flags of `nvstripe controller` but the etcd and host NQN
// ones, with their defaults (AddFlags); Options turns them into the
// daemon's Options.
type Flags struct {
	Settings
	API, Metrics  string // --api, --metrics
	ScrubInterval time.Duration
	Gossip        pool.Spec
	GossipHost    string
	AdminTLS      admin.TLSFiles
	DHCHAP        volclient.DHCHAPFiles
}

// AddFlags defines the flags on fl, with DefaultSettings' defaults.
func (f *Flags) AddFlags(fl *pflag.FlagSet) {
	d := DefaultSettings()
	fl.StringVar(&f.Holder, "holder", "", "this controller's name in etcd (default controller.HOSTNAME)")
	fl.DurationVar(&f.OutAfter, "out-after", d.OutAfter, "a namespace down this long is marked out and rebuilt")
	fl.DurationVar(&f.Grace, "grace", d.Grace, "a host silent this long is down")
	fl.DurationVar(&f.Interval, "interval", d.Interval, "time between decisions")
	fl.DurationVar(&f.ProbeTimeout, "probe-timeout", d.ProbeTimeout, "TCP probe timeout of a namespace path")
	fl.DurationVar(&f.LeaderTTL, "leader-ttl", d.LeaderTTL, "leadership lease TTL: how soon another controller takes over")
	f.Bandwidth = d.Bandwidth
	fl.Var(units.NewFlag(&f.Bandwidth), "bandwidth", "bytes per second the controller's own moves may use (0: unlimited)")
	fl.IntVar(&f.MaxMoves, "max-moves", d.MaxMoves, "moves in flight in the whole cluster")
	fl.IntVar(&f.MaxMovesPerNS, "max-moves-per-ns", d.MaxMovesPerNS, "moves in flight writing to or copying from one namespace")
	fl.Float64Var(&f.MinUp, "min-up", d.MinUp, "mark namespaces out only while at least this fraction of hosts is up (fewer suggests the controller is cut off; negative: no guard)")
	fl.StringVar(&f.API, "api", admin.DefaultSocket, "the gRPC admin API, for admin --controller: a unix socket PATH (mode 0600), or HOST:PORT with --admin-tls-* (\"\": off)")
	f.AdminTLS.AddFlags(fl, "the controller's")
	fl.DurationVar(&f.ScrubInterval, "scrub-interval", 7*24*time.Hour, "how often the owner of each checksummed, mapped volume scrubs it (0: never; 'admin scrub' starts one now)")
	fl.StringVar(&f.Metrics, "metrics", "", "HOST:PORT of the Prometheus metrics listener (tasks, volume health; \"\": off)")
	fl.StringVar(&f.HostTraddr, "host-traddr", "", volclient.HostTraddrUsage)
	f.DHCHAP.AddFlags(fl)
	fl.BoolVar(&f.Probe, "probe", d.Probe, "TCP-probe the namespace paths of hosts that do not gossip (false: such hosts are not tracked)")
	fl.StringVar(&f.GossipHost, "gossip-host", "", "the host name this controller gossips (default: the machine's host name)")
	f.Gossip.AddFlags(fl)
}

// Options checks the flags, loads the DH-HMAC-CHAP secrets and turns the
// flags into the daemon's Options over s, connecting as hostNQN and
// logging to log. Mistakes are config.IsUsage.
func (f *Flags) Options(s *meta.Store, hostNQN string, log *slog.Logger) (Options, error) {
	if f.Gossip.Addr == "" && (len(f.Gossip.Join) > 0 || f.GossipHost != "") {
		return Options{}, config.Usage(fmt.Errorf("--gossip-join and --gossip-host need --gossip"))
	}
	f.Settings.Gossip = f.Gossip.Addr != ""
	cfg, err := f.Settings.RunnerConfig(s, log)
	if errors.Is(err, ErrSettings) {
		return Options{}, config.Usage(err)
	} else if err != nil {
		return Options{}, err
	}
	secret, ctrl, err := f.DHCHAP.Load()
	if err != nil {
		return Options{}, err
	}
	tlsKey, err := f.DHCHAP.TLSKey()
	if err != nil {
		return Options{}, err
	}
	return Options{Runner: cfg, HostNQN: hostNQN, MetricsAddr: f.Metrics, DHCHAPSecret: secret, DHCHAPCtrlSecret: ctrl, TLSKey: tlsKey,
		HostTraddr: f.HostTraddr, ScrubInterval: f.ScrubInterval, Gossip: f.Gossip, GossipHost: f.GossipHost, AdminAddr: f.API, AdminTLS: f.AdminTLS}, nil
}
