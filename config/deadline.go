package config

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Bounded runs fn with ctx limited to d (no limit when d <= 0): the
// command line's --timeout on a one-shot command. When fn fails because
// that deadline passed (ctx itself still live), the error is a
// TimeoutError naming the peer that did not answer (who, e.g. "etcd at
// 127.0.0.1:2379") and the flag that points at it.
func Bounded(ctx context.Context, d time.Duration, who, flag string, fn func(context.Context) error) error {
	if d <= 0 {
		return fn(ctx)
	}
	bctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := fn(bctx)
	var known diagnosed
	if errors.As(err, &known) && known.Diagnosed() {
		return err // it says what is there; "did not answer" would contradict it
	}
	if err != nil && errors.Is(bctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return &TimeoutError{Who: who, Flag: flag, After: d, Err: err}
	}
	return err
}

// diagnosed is an error that found out what is at the peer's address (a
// refused connection, a name that does not resolve: meta.DialError).
type diagnosed interface{ Diagnosed() bool }

// TimeoutError is a command that ran past --timeout waiting for a peer.
type TimeoutError struct {
	Who, Flag string
	After     time.Duration
	Err       error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s did not answer within %v: is it running? (%s, --timeout): %v", e.Who, e.After, e.Flag, e.Err)
}

// Unwrap lets errors.Is find both the cause and context.DeadlineExceeded.
func (e *TimeoutError) Unwrap() []error { return []error{e.Err, context.DeadlineExceeded} }
