package logging

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

func TestWarnEvery(t *testing.T) {
	var b bytes.Buffer
	now := time.Unix(1000, 0)
	warn := warnEvery(slog.New(slog.NewJSONHandler(&b, nil)), time.Minute, "volume runs degraded", func() time.Time { return now })
	warn("v", "volume", "v")
	warn("v", "volume", "v") // suppressed
	warn("w", "volume", "w")
	now = now.Add(30 * time.Second)
	warn("v", "volume", "v") // suppressed
	now = now.Add(31 * time.Second)
	warn("v", "volume", "v")
	rs := testutil.JSONRecords(t, b.String())
	if len(rs) != 3 {
		t.Fatalf("%d warnings, want 3:\n%s", len(rs), b.String())
	}
	if rs[0]["volume"] != "v" || rs[1]["volume"] != "w" || rs[2]["volume"] != "v" || rs[2]["suppressed"] != float64(2) || rs[0]["level"] != "WARN" {
		t.Errorf("warnings %v", rs)
	}
}
