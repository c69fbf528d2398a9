package admin

import (
	"context"
	"strings"
	"testing"
)

// TestScrubAllSkipsUnmapped: ScrubAll (ScrubNamed of none) goes through
// every volume and skips those nobody maps read-write, where Scrub of the
// named volume (ScrubNamed of it) fails.
func TestScrubAllSkipsUnmapped(t *testing.T) {
	s := fixture(t, 6)
	ctx := context.Background()
	var out strings.Builder
	res, err := ScrubAll(ctx, &out, s, false)
	if err != nil || len(res) != 1 || res[0].Volume != "v" || res[0].Skipped == "" {
		t.Fatalf("ScrubAll: %+v %v, want v skipped", res, err)
	}
	if !strings.Contains(out.String(), "volume v: skipped") {
		t.Fatalf("ScrubAll printed %q", out.String())
	}
	if _, err := Scrub(ctx, &out, s, []string{"v"}, true, false); err == nil {
		t.Fatal("Scrub of an unmapped named volume succeeded")
	}
	if res, err := ScrubNamed(ctx, &out, s, nil, false); err != nil || len(res) != 1 || res[0].Skipped == "" {
		t.Errorf("ScrubNamed of none: %+v %v, want v skipped", res, err)
	}
	if _, err := ScrubNamed(ctx, &out, s, []string{"v"}, false); err == nil {
		t.Error("ScrubNamed of an unmapped volume succeeded")
	}
}
