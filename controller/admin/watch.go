package admin

import (
	"context"
	"time"
)

// Watch calls fn with the cluster status now and then every interval until
// ctx ends (nil) or a call fails; interval <= 0 calls it once.
func Watch(ctx context.Context, ops Ops, interval time.Duration, fn func(*StatusReply) error) error {
	for {
		st, err := ops.Status(ctx, &StatusRequest{})
		if err != nil {
			if ctx.Err() != nil && interval > 0 {
				return nil
			}
			return err
		}
		if err := fn(st); err != nil || interval <= 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
