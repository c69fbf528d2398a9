package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
)

// defaultTimeout is --timeout's default: how long a one-shot command waits
// for etcd, the controller or the agent.
const defaultTimeout = 30 * time.Second

// bounded runs fn with cmd's context limited to --timeout (config.Bounded:
// past it, the error names the peer that did not answer, who, and the flag
// that points at it). Daemons and foreground `map` are not bounded: they
// run until interrupted.
func (g *globals) bounded(cmd *cobra.Command, who, flag string, fn func() error) error {
	parent := cmd.Context()
	defer cmd.SetContext(parent)
	return config.Bounded(parent, g.timeout, who, flag, func(ctx context.Context) error {
		cmd.SetContext(ctx)
		return fn()
	})
}

// etcdPeer names the etcd endpoints for bounded.
func (g *globals) etcdPeer() string { return "etcd at " + strings.Join(config.SplitList(g.etcd), ",") }
