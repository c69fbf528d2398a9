package cli

import (
	"context"
	"errors"
	"sync"

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

// lazyStore opens the store at the first call and keeps it; close closes it.
func lazyStore(gl *globals, a *etcdAuth) (open func(context.Context) (*meta.Store, error), close func()) {
	var mu sync.Mutex
	var s *meta.Store
	open = func(ctx context.Context) (*meta.Store, error) {
		mu.Lock()
		defer mu.Unlock()
		if s != nil {
			return s, nil
		}
		var err error
		s, err = openStore(ctx, gl, a)
		return s, err
	}
	return open, func() {
		mu.Lock()
		defer mu.Unlock()
		if s != nil {
			s.Close()
		}
	}
}

// startTargetGossip starts the gossip member of a target host (target
// agent; pool.Spec.StartTarget) when --gossip is set. It returns the
// function that leaves the pool, and the gossip address ("" without
// --gossip).
func startTargetGossip(gl *globals, a *etcdAuth, f *gossipFlags, host string, names []string) (func(), string, error) {
	f.Cluster = a.cluster
	open, closeStore := lazyStore(gl, a)
	m, err := f.StartTarget(host, names, open, logging.Logf(gl.logger("gossip")))
	if err != nil || m == nil {
		closeStore()
		return func() {}, "", specError(err)
	}
	return func() { m.Leave(); closeStore() }, m.Addr(), nil
}
