package controllerd

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nvstripe/nvstripe/controller"
	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/internal/logging"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/moves"
)

// ErrSettings marks settings that do not fit together (an operator's
// mistake).
var ErrSettings = errors.New("bad controller settings")

// Settings are the controller's knobs as an operator gives them (the flags
// of `nvstripe controller`).
type Settings struct {
	Holder                    string
	Bandwidth                 int64 // bytes per second of the controller's own moves; 0: unlimited
	OutAfter, Interval, Grace time.Duration
	ProbeTimeout, LeaderTTL   time.Duration // ProbeTimeout: above 0 while Probe is on
	MaxMoves, MaxMovesPerNS   int
	MinUp                     float64
	Probe                     bool // TCP-probe the paths of hosts that do not gossip
	Gossip                    bool // the controller is a gossip member
	// HostTraddr is the local IP address the probes leave from (give
	// Options.HostTraddr the same for the mover's connections).
	HostTraddr string
}

// RunnerConfig turns the settings into the Runner's configuration over s,
// logging to log (moves through moves.Log) (New fills in the mover, the domain label and a
// default holder).
func (st Settings) RunnerConfig(s *meta.Store, log *slog.Logger) (controller.RunnerConfig, error) {
	if err := st.checkProbe(); err != nil {
		return controller.RunnerConfig{}, err
	}
	bw := st.Bandwidth
	if bw == 0 {
		bw = -1
	}
	pacer, err := moves.NewPacer(moves.PacerConfig{Bandwidth: bw})
	if err != nil {
		return controller.RunnerConfig{}, fmt.Errorf("%w: %w", ErrSettings, err)
	}
	cfg := controller.RunnerConfig{Store: s, Holder: st.Holder, Interval: st.Interval, LeaderTTL: st.LeaderTTL,
		Decide: decide.Config{OutAfter: st.OutAfter, MaxMoves: st.MaxMoves, MaxMovesPerNS: st.MaxMovesPerNS, MinUpFraction: st.MinUp},
		Pacer:  pacer, Health: health.TrackerConfig{Grace: st.Grace}, Logf: logging.Logf(log), OnMove: moves.Log(log)}
	if st.Probe {
		cfg.Probe = controller.ProbeTCPFrom(st.ProbeTimeout, st.HostTraddr)
	}
	if st.Gossip {
		cfg.Gossip = controller.NewGossip(nil)
	}
	return cfg, nil
}

// checkProbe says why st's probes cannot run (class ErrSettings): a probe
// needs a time limit (a dialer takes 0 as none, and a negative one fails
// every dial, which would judge every probed host down).
func (st Settings) checkProbe() error {
	if !st.Probe || st.ProbeTimeout > 0 {
		return nil
	}
	return fmt.Errorf("controller: ProbeTimeout %v (--probe-timeout): a probe needs a time limit: give one above 0 (default %v), or turn Probe off (--probe=false): %w",
		st.ProbeTimeout, DefaultSettings().ProbeTimeout, ErrSettings)
}
