package controllerd

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/controller/decide"
	"github.com/nvstripe/nvstripe/health/pool"
	"github.com/nvstripe/nvstripe/moves"
)

// TestSettingsRunnerConfig: the settings reach the runner, its moves and
// its lines are logged through the one slog logger.
func TestSettingsRunnerConfig(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewTextHandler(&b, nil))
	cfg, err := Settings{Holder: "c1", OutAfter: time.Minute, MaxMoves: 3, Probe: true, ProbeTimeout: time.Second, Gossip: true}.RunnerConfig(nil, log)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Holder != "c1" || cfg.Decide.OutAfter != time.Minute || cfg.Decide.MaxMoves != 3 || cfg.Probe == nil || cfg.Gossip == nil || cfg.Pacer == nil {
		t.Errorf("config %+v", cfg)
	}
	cfg.OnMove(moves.Event{Task: moves.Task{Segment: decide.SegmentID{Volume: "v"}, Kind: decide.MoveDrain}})
	cfg.Logf("[WARN] memberlist: suspect")
	if out := b.String(); !strings.Contains(out, `msg="move started"`) || !strings.Contains(out, "kind=drain") || !strings.Contains(out, "level=WARN msg=\"memberlist: suspect\"") {
		t.Errorf("log:\n%s", out)
	}
}

// TestSettingsChecksProbeTimeout: with probes on, a ProbeTimeout not above
// 0 is refused (ErrSettings, saying what to give); RunnerConfig used to
// take it, and only the CLI refused it. With probes off it is not looked at.
func TestSettingsChecksProbeTimeout(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		probe bool
		d     time.Duration
		bad   bool
	}{{true, 0, true}, {true, -time.Second, true}, {true, time.Millisecond, false}, {false, 0, false}, {false, -time.Second, false}} {
		_, err := Settings{Probe: c.probe, ProbeTimeout: c.d}.RunnerConfig(nil, log)
		want := "ProbeTimeout " + c.d.String() + " (--probe-timeout): a probe needs a time limit: give one above 0 (default 1s)"
		switch {
		case c.bad && (!errors.Is(err, ErrSettings) || !strings.Contains(fmt.Sprint(err), want)):
			t.Errorf("Probe %v, ProbeTimeout %v: %v, want ErrSettings saying %q", c.probe, c.d, err, want)
		case !c.bad && err != nil:
			t.Errorf("Probe %v, ProbeTimeout %v: %v", c.probe, c.d, err)
		}
	}
}

// TestFlagDefaults: the flags' defaults are DefaultSettings, and those are
// the libraries' own (a zero Settings' runner config, defaulted).
func TestFlagDefaults(t *testing.T) {
	var f Flags
	fl := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	f.AddFlags(fl)
	if err := fl.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if f.Settings != DefaultSettings() {
		t.Errorf("flag defaults %+v, want %+v", f.Settings, DefaultSettings())
	}
	d := DefaultSettings()
	var dc decide.Config
	dc.EnsureDefaults()
	if d.OutAfter != dc.OutAfter || d.MaxMoves != dc.MaxMoves || d.MaxMovesPerNS != dc.MaxMovesPerNS ||
		d.MinUp != dc.MinUpFraction || d.Bandwidth != 256<<20 || d.Grace != 5*time.Second || d.LeaderTTL != 10*time.Second {
		t.Errorf("DefaultSettings %+v, decide defaults %+v", d, dc)
	}
}

// TestFlagsOptions: gossip flags without --gossip and settings that do not
// fit are usage mistakes; good flags reach the daemon's options.
func TestFlagsOptions(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	bad := []Flags{{Settings: DefaultSettings(), GossipHost: "h"}, {Settings: DefaultSettings(), Gossip: pool.Spec{Join: []string{"1.2.3.4:5"}}}}
	for _, f := range bad {
		if _, err := f.Options(nil, "nqn.x", log); !config.IsUsage(err) {
			t.Errorf("%+v: %v, want a usage mistake", f, err)
		}
	}
	f := Flags{Settings: DefaultSettings(), API: "sock", Metrics: "127.0.0.1:0", Gossip: pool.Spec{Addr: "127.0.0.1:0"}}
	o, err := f.Options(nil, "nqn.x", log)
	if err != nil || o.HostNQN != "nqn.x" || o.AdminAddr != "sock" || o.MetricsAddr != "127.0.0.1:0" || o.Runner.Gossip == nil || o.Runner.Probe == nil {
		t.Errorf("options %+v %v", o, err)
	}
}
