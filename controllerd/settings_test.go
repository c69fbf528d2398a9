package controllerd

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/controller"
)

// TestSettingsRunnerConfig: the settings reach the runner, its moves and
// its lines are logged through the one slog logger.
func TestSettingsRunnerConfig(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewTextHandler(&b, nil))
	cfg, err := Settings{Holder: "c1", OutAfter: time.Minute, MaxMoves: 3, Probe: true, Gossip: true}.RunnerConfig(nil, log)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Holder != "c1" || cfg.Decide.OutAfter != time.Minute || cfg.Decide.MaxMoves != 3 || cfg.Probe == nil || cfg.Gossip == nil || cfg.Pacer == nil {
		t.Errorf("config %+v", cfg)
	}
	cfg.OnMove(controller.MoveEvent{Task: controller.MoveTask{Segment: controller.SegmentID{Volume: "v"}, Kind: controller.MoveDrain}})
	cfg.Logf("[WARN] memberlist: suspect")
	if out := b.String(); !strings.Contains(out, `msg="move started"`) || !strings.Contains(out, "kind=drain") || !strings.Contains(out, "level=WARN msg=\"memberlist: suspect\"") {
		t.Errorf("log:\n%s", out)
	}
}
