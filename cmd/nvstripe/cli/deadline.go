package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
)

// defaultTimeout is --timeout's default: how long a one-shot command waits
// for etcd, the controller or the agent.
const defaultTimeout = 30 * time.Second

// bounded runs fn with cmd's context limited to --timeout (none when it is
// 0). When fn fails because that deadline passed, the error names the peer
// that did not answer (who, e.g. "etcd at 127.0.0.1:2379") and the flag
// that points at it. Daemons and foreground `map` are not bounded: they
// run until interrupted.
func (g *globals) bounded(cmd *cobra.Command, who, flag string, fn func() error) error {
	if g.timeout <= 0 {
		return fn()
	}
	parent := cmd.Context()
	ctx, cancel := context.WithTimeout(parent, g.timeout)
	defer cancel()
	cmd.SetContext(ctx)
	defer cmd.SetContext(parent)
	err := fn()
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
		return &timeoutError{who: who, flag: flag, d: g.timeout, err: err}
	}
	return err
}

// timeoutError is a command that ran past --timeout waiting for a peer.
type timeoutError struct {
	who, flag string
	d         time.Duration
	err       error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%s did not answer within %v: is it running? (%s, --timeout): %v", e.who, e.d, e.flag, e.err)
}

// Unwrap lets errors.Is find both the cause and context.DeadlineExceeded.
func (e *timeoutError) Unwrap() []error { return []error{e.err, context.DeadlineExceeded} }

// etcdPeer names the etcd endpoints for bounded.
func (g *globals) etcdPeer() string { return "etcd at " + strings.Join(config.SplitList(g.etcd), ",") }
