package cli

import (
	"context"
	"errors"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/health/pool"
	"github.com/nvstripe/nvstripe/logging"
	"github.com/nvstripe/nvstripe/meta"
)

// gossipFlags put a daemon in the health gossip pool (pool.Spec).
type gossipFlags struct{ pool.Spec }

// register defines --gossip, --gossip-join and --gossip-profile on fl.
func (f *gossipFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.Addr, "gossip", "", "IP:PORT to gossip health on, TCP and UDP (e.g. 10.0.0.5:7946; \"\": no gossip)")
	fl.StringSliceVar(&f.Join, "gossip-join", nil,
		"gossip members to join, IP:PORT, comma-separated (default: the members registered in etcd, see --etcd)")
	fl.StringVar(&f.Profile, "gossip-profile", "lan",
		"gossip failure-detection timing: lan (a dead member is seen in seconds), local (one machine) or test")
	fl.StringVar(&f.KeyFile, "gossip-key-file", "", "file with the pool's AES key in base64, 128, 192 or 256 bits "+
		"(head -c 32 /dev/urandom | base64 > FILE): gossip is encrypted and only members with the key join (\"\": clear text)")
}

// specError makes a malformed gossip setting a usage error.
func specError(err error) error {
	if errors.Is(err, pool.ErrSpec) {
		return usageError{err}
	}
	return err
}

// lazyStore is the store of the flags, opened at its first use.
func lazyStore(gl *globals, a *etcdAuth) *meta.Lazy {
	return meta.NewLazy(func(ctx context.Context) (*meta.Store, error) { return openStore(ctx, gl, a) })
}

// startTargetGossip starts the gossip member of a target host (target
// agent; pool.Spec.StartTarget) when --gossip is set. It returns the
// function that leaves the pool, and the gossip address ("" without
// --gossip).
func startTargetGossip(gl *globals, a *etcdAuth, f *gossipFlags, host string, names []string) (func(), string, error) {
	f.Cluster = a.cluster
	store := lazyStore(gl, a)
	m, err := f.StartTarget(host, names, store.Open, logging.Logf(gl.logger("gossip")))
	if err != nil || m == nil {
		store.Close()
		return func() {}, "", specError(err)
	}
	return func() { m.Leave(); store.Close() }, m.Addr(), nil
}
