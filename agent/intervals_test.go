package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/agent/api"
)

// TestNewRefusesNegativeIntervals: New refuses a negative CleanInterval or
// RecheckInterval (api.ErrInvalid, naming the option). The old New took
// them, and the first mapping panicked in time.NewTicker (the mapping's
// clean ticker, or its volume's recheck ticker).
func TestNewRefusesNegativeIntervals(t *testing.T) {
	e := newAgentEnv(t)
	for _, c := range []struct {
		set  func(*Options)
		want string
	}{
		{func(o *Options) { o.CleanInterval = -time.Second }, "CleanInterval -1s: negative"},
		{func(o *Options) { o.RecheckInterval = -time.Nanosecond }, "RecheckInterval -1ns: negative"},
	} {
		o := e.options(t, "")
		c.set(&o)
		a, err := New(context.Background(), o)
		if a != nil {
			a.Close(context.Background())
		}
		if !errors.Is(err, api.ErrInvalid) || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("New: %v, want api.ErrInvalid saying %q", err, c.want)
		}
	}
}
