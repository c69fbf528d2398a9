package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"go.uber.org/zap"
)

func TestZapToSlog(t *testing.T) {
	var b bytes.Buffer
	z := ZapToSlog(slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo})), slog.LevelWarn)
	z.Info("below min")
	z.Debug("hidden")
	z.With(zap.String("target", "etcd")).Warn("retrying", zap.Int("attempt", 2), zap.Error(errors.New("boom")))
	var r map[string]any
	if err := json.Unmarshal(b.Bytes(), &r); err != nil {
		t.Fatalf("%q: %v", b.String(), err)
	}
	if r["level"] != "WARN" || r["msg"] != "retrying" || r["target"] != "etcd" || r["attempt"] != float64(2) || r["error"] != "boom" {
		t.Errorf("record %v", r)
	}
}
