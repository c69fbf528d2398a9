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

// TestNewRefusesBadReportTimeoutAndPacer: New refuses a negative
// Report.Timeout and a Pacer that moves.NewPacer refuses (api.ErrInvalid,
// saying what to give). The old New took them: every report to etcd then
// failed at once (its deadline already past), so no namespace was ever
// marked failed, and every mapping failed in moves.NewPacer.
func TestNewRefusesBadReportTimeoutAndPacer(t *testing.T) {
	e := newAgentEnv(t)
	for _, c := range []struct {
		set  func(*Options)
		want string
	}{
		{func(o *Options) { o.Report.Timeout = -time.Second }, "Report.Timeout -1s: negative: give 0 (the default, 5s) or more"},
		{func(o *Options) { o.Pacer.Burst = -1 }, "Pacer: pacer config: Burst -1: give 0 (the default) or more"},
		{func(o *Options) { o.Pacer.MinFactor = 2 }, "MinFactor 2: give above 0 and at most 1"},
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
