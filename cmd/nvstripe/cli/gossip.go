package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/health/pool"
	"github.com/nvstripe/nvstripe/meta"
)

// gossipFlags put a daemon in the health gossip pool (package health).
type gossipFlags struct {
	addr    string   // --gossip IP:PORT; "" is no gossip
	join    []string // --gossip-join
	profile string   // --gossip-profile
	labels  []string // --label KEY=VALUE (targets)
}

// register defines --gossip, --gossip-join and --gossip-profile on fl.
func (f *gossipFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.addr, "gossip", "", "IP:PORT to gossip health on, TCP and UDP (e.g. 10.0.0.5:7946; \"\": no gossip)")
	fl.StringSliceVar(&f.join, "gossip-join", nil,
		"gossip members to join, IP:PORT, comma-separated (default: the members registered in etcd, see --etcd)")
	fl.StringVar(&f.profile, "gossip-profile", "lan",
		"gossip failure-detection timing: lan (a dead member is seen in seconds), local (one machine) or test")
}

// config checks the flags and returns the health.Config of a member.
func (f *gossipFlags) config(m health.Meta, name string) (health.Config, error) {
	host, portS, err := net.SplitHostPort(f.addr)
	port, perr := strconv.Atoi(portS)
	if err != nil || perr != nil || port < 0 || port > 65535 || net.ParseIP(host) == nil {
		return health.Config{}, usageError{fmt.Errorf("--gossip %q: want IP:PORT", f.addr)}
	}
	profiles := map[string]health.Profile{"lan": health.ProfileLAN, "local": health.ProfileLocal, "test": health.ProfileTest}
	p, ok := profiles[f.profile]
	if !ok {
		return health.Config{}, usageError{fmt.Errorf("--gossip-profile %q: want lan, local or test", f.profile)}
	}
	for _, l := range f.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return health.Config{}, usageError{fmt.Errorf("--label %q: want KEY=VALUE", l)}
		}
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[k] = v
	}
	if _, err := m.Encode(); err != nil {
		return health.Config{}, usageError{err}
	}
	return health.Config{Meta: m, Name: name, BindAddr: host, BindPort: port, Profile: p}, nil
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
// serve, target agent) when --gossip is set: role target, Meta.Host = host,
// names = the namespaces it serves (informational: the controller maps a
// host to its namespaces through etcd). Without --gossip-join it finds the
// pool through etcd and registers itself there. It returns the function
// that leaves the pool, and the gossip address ("" without --gossip).
func startTargetGossip(cmd *cobra.Command, gl *globals, a *etcdAuth, f *gossipFlags, host string, names []string) (func(), string, error) {
	cfg, err := f.targetConfig(host, names)
	if err != nil || f.addr == "" {
		return func() {}, "", err
	}
	pc := pool.Config{Health: cfg, Join: f.join, Logf: lineLogger(cmd.ErrOrStderr())}
	closeStore := func() {}
	if len(f.join) == 0 {
		pc.Store, closeStore = lazyStore(gl, a)
	}
	m, err := pool.Start(pc)
	if err != nil {
		closeStore()
		return nil, "", err
	}
	return func() { m.Leave(); closeStore() }, m.Addr(), nil
}

// targetConfig checks the gossip flags of a target host and returns its
// member's health.Config (none without --gossip).
func (f *gossipFlags) targetConfig(host string, names []string) (health.Config, error) {
	if f.addr == "" {
		if host != "" || len(f.join) > 0 || len(f.labels) > 0 {
			return health.Config{}, usageError{errors.New("--host, --gossip-join and --label need --gossip")}
		}
		return health.Config{}, nil
	}
	if host == "" {
		return health.Config{}, usageError{errors.New("--gossip needs --host: the host's name in etcd (nvstripe host add)")}
	}
	return f.config(health.Meta{Role: health.RoleTarget, Host: host, Namespaces: names}, "")
}
