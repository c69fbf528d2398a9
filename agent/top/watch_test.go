package top

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestWatchRefusesInterval: an interval not above 0 is refused before
// anything is read; the old Watch read the endpoints once and panicked in
// time.NewTicker.
func TestWatchRefusesInterval(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		err := Watch(context.Background(), []string{"http://127.0.0.1:1/metrics"}, d, 1, func(string) {}, func([]Row) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "give one above 0") {
			t.Errorf("interval %v: %v, want a refusal", d, err)
		}
	}
}
