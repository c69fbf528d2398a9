package config

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBounded: past the deadline the error names the peer and the flag
// and is both the cause and context.DeadlineExceeded; a cancelled parent
// and no limit pass the error through unchanged.
func TestBounded(t *testing.T) {
	wait := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	err := Bounded(context.Background(), 10*time.Millisecond, "etcd at e:1", "--etcd", wait)
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) ||
		err.Error() != "etcd at e:1 did not answer within 10ms: is it running? (--etcd, --timeout): context deadline exceeded" {
		t.Errorf("past the deadline: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Bounded(ctx, time.Hour, "x", "--x", wait); err != context.Canceled {
		t.Errorf("parent cancelled: %v, want context.Canceled itself", err)
	}
	cause := errors.New("refused")
	err = Bounded(context.Background(), 0, "x", "--x", func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); ok {
			t.Error("--timeout 0 set a deadline")
		}
		return cause
	})
	if err != cause {
		t.Errorf("no limit: %v, want the cause itself", err)
	}
	found := probed{}
	err = Bounded(context.Background(), 10*time.Millisecond, "x", "--x", func(ctx context.Context) error { <-ctx.Done(); return found })
	if err != error(found) {
		t.Errorf("a diagnosed error past the deadline: %v, want it as it is", err)
	}
}

// probed is an error that says what it found at the peer.
type probed struct{}

func (probed) Error() string   { return "nothing listens at e:1 (connection refused)" }
func (probed) Diagnosed() bool { return true }
