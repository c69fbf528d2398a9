package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/health"
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

// gossiper is a running member of the gossip pool. It keeps itself joined:
// while it sees no other member it joins the seeds again (the pool may have
// formed after it started, or every other member restarted), and when it
// has a store it keeps its seed record registered in etcd.
type gossiper struct {
	node   *health.Node
	seeds  func(ctx context.Context) ([]string, error)
	store  func(ctx context.Context) (*meta.Store, error) // nil: do not register
	rec    meta.GossipRecord
	every  time.Duration
	logf   func(string, ...any)
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	reg *meta.GossipRegistration
}

// gossipSeeds returns the seed source: --gossip-join when given, else the
// members registered in etcd (store opens it).
func (f *gossipFlags) gossipSeeds(store func(context.Context) (*meta.Store, error)) func(context.Context) ([]string, error) {
	if len(f.join) > 0 {
		return func(context.Context) ([]string, error) { return f.join, nil }
	}
	return func(ctx context.Context) ([]string, error) {
		s, err := store(ctx)
		if err != nil {
			return nil, err
		}
		recs, err := s.GossipSeeds(ctx)
		var addrs []string
		for _, r := range recs {
			addrs = append(addrs, r.Addr)
		}
		return addrs, err
	}
}

// startGossip starts the node and the loop that keeps it joined and
// registered. store may be nil (no seed record).
func startGossip(cfg health.Config, seeds func(context.Context) ([]string, error),
	store func(context.Context) (*meta.Store, error), logf func(string, ...any)) (*gossiper, error) {
	cfg.Logf = func(format string, args ...any) { // memberlist's lines, less its debugging
		if line := fmt.Sprintf(format, args...); !strings.Contains(line, "[DEBUG]") {
			logf("%s", line)
		}
	}
	node, err := health.Start(cfg)
	if err != nil {
		return nil, err
	}
	every := 5 * time.Second
	if cfg.Profile != health.ProfileLAN {
		every = 500 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &gossiper{node: node, seeds: seeds, store: store, every: every, logf: logf, cancel: cancel, done: make(chan struct{}),
		rec: meta.GossipRecord{Name: node.Name(), Role: cfg.Meta.Role.String(), Host: cfg.Meta.Host, Addr: node.Addr()}}
	go g.run(ctx)
	return g, nil
}

// run joins and registers until ctx ends.
func (g *gossiper) run(ctx context.Context) {
	defer close(g.done)
	for ctx.Err() == nil {
		if len(g.node.Members()) <= 1 {
			g.join(ctx)
		}
		if g.store != nil && g.registration() == nil {
			g.register(ctx)
		}
		t := time.NewTimer(g.every)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

func (g *gossiper) join(ctx context.Context) {
	addrs, err := g.seeds(ctx)
	addrs = slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == g.node.Addr() })
	if err != nil || len(addrs) == 0 {
		if err != nil && ctx.Err() == nil {
			g.logf("gossip: seeds: %v", err)
		}
		return
	}
	if n, err := g.node.Join(addrs); err != nil {
		g.logf("gossip: %v (retrying)", err)
	} else {
		g.logf("gossip: %s joined the pool through %d of %v", g.node.Name(), n, addrs)
	}
}

func (g *gossiper) registration() *meta.GossipRegistration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reg
}

func (g *gossiper) register(ctx context.Context) {
	s, err := g.store(ctx)
	if err == nil {
		var reg *meta.GossipRegistration
		if reg, err = s.RegisterGossip(ctx, g.rec, 0); err == nil {
			g.mu.Lock()
			g.reg = reg
			g.mu.Unlock()
			return
		}
	}
	if ctx.Err() == nil {
		g.logf("gossip: registering %s in etcd: %v (retrying)", g.rec.Addr, err)
	}
}

// stop removes the seed record, leaves the pool (the others see this
// member gone at once instead of after failed probes) and shuts the node
// down.
func (g *gossiper) stop() {
	g.cancel()
	<-g.done
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if reg := g.registration(); reg != nil {
		_ = reg.Close(ctx)
	}
	if err := g.node.Leave(2 * time.Second); err != nil {
		g.logf("gossip: %v", err)
	}
	_ = g.node.Shutdown()
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
	var store func(context.Context) (*meta.Store, error)
	closeStore := func() {}
	if len(f.join) == 0 {
		store, closeStore = lazyStore(gl, a)
	}
	gs, err := startGossip(cfg, f.gossipSeeds(store), store, lineLogger(cmd.ErrOrStderr()))
	if err != nil {
		closeStore()
		return nil, "", err
	}
	return func() { gs.stop(); closeStore() }, gs.node.Addr(), nil
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
