package pool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/health"
	"github.com/nvstripe/nvstripe/meta"
)

// ErrSpec marks a malformed gossip setting: an operator's mistake, found
// before anything listens.
var ErrSpec = errors.New("bad gossip setting")

// Spec is how an operator names a gossip member (nvstripe's --gossip,
// --gossip-join, --gossip-profile, --gossip-key-file and --label flags, and
// the cluster name).
type Spec struct {
	Addr    string   // IP:PORT to gossip on; "" is no gossip
	Join    []string // members to join, IP:PORT
	Profile string   // failure-detection timing: lan, local or test
	Labels  []string // failure-domain labels KEY=VALUE (targets)
	// KeyFile holds the pool's encryption key (health.ReadKeyFile); ""
	// gossips in clear text.
	KeyFile string
	// Cluster names the cluster: the members' label is "nvstripe/" +
	// Cluster, so pools of two clusters never merge. "": no label.
	Cluster string
}

// Label is the gossip label of the members of cluster's pool.
func Label(cluster string) string {
	if cluster == "" {
		return ""
	}
	return "nvstripe/" + cluster
}

// profiles are the Profile names.
var profiles = map[string]health.Profile{"lan": health.ProfileLAN, "local": health.ProfileLocal, "test": health.ProfileTest}

// Member checks the spec and returns the health.Config of a member with
// meta m (its Labels filled from the spec) named name.
func (s Spec) Member(m health.Meta, name string) (health.Config, error) {
	host, portS, err := net.SplitHostPort(s.Addr)
	port, perr := strconv.Atoi(portS)
	if err != nil || perr != nil || port < 0 || port > 65535 || net.ParseIP(host) == nil {
		return health.Config{}, fmt.Errorf("%w: gossip address %q: want IP:PORT", ErrSpec, s.Addr)
	}
	p, ok := profiles[s.Profile]
	if !ok {
		return health.Config{}, fmt.Errorf("%w: gossip profile %q: want lan, local or test", ErrSpec, s.Profile)
	}
	labels, err := meta.ParseLabels(s.Labels)
	if err != nil {
		return health.Config{}, fmt.Errorf("%w: %w", ErrSpec, err)
	}
	for k, v := range labels {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[k] = v
	}
	if _, err := m.Encode(); err != nil {
		return health.Config{}, fmt.Errorf("%w: %w", ErrSpec, err)
	}
	var key []byte
	if s.KeyFile != "" {
		if key, err = health.ReadKeyFile(s.KeyFile); err != nil {
			return health.Config{}, fmt.Errorf("%w: %w", ErrSpec, err)
		}
	}
	return health.Config{Meta: m, Name: name, BindAddr: host, BindPort: port, Profile: p, Key: key, Label: Label(s.Cluster)}, nil
}

// TargetMember checks the spec of a target host's member (role target,
// Meta.Host = host, names = the namespaces it serves, informational) and
// returns its health.Config; the zero Config when the spec has no Addr.
func (s Spec) TargetMember(host string, names []string) (health.Config, error) {
	if s.Addr == "" {
		if host != "" || len(s.Join) > 0 || len(s.Labels) > 0 || s.KeyFile != "" {
			return health.Config{}, fmt.Errorf("%w: a host name, seeds to join, labels and a key need a gossip address", ErrSpec)
		}
		return health.Config{}, nil
	}
	if host == "" {
		return health.Config{}, fmt.Errorf("%w: gossip needs the host's name in etcd (nvstripe host add)", ErrSpec)
	}
	return s.Member(health.Meta{Role: health.RoleTarget, Host: host, Namespaces: names}, "")
}

// StartTarget starts the member of a target host (TargetMember) and the
// loop that keeps it joined: it joins Join, or without it the members
// registered in the store, registering itself there. It returns nil
// when the spec has no Addr. Mistakes in the spec are ErrSpec.
func (s Spec) StartTarget(host string, names []string, store func(context.Context) (*meta.Store, error), logf func(string, ...any)) (*Member, error) {
	hc, err := s.TargetMember(host, names)
	if err != nil || s.Addr == "" {
		return nil, err
	}
	if len(s.Join) > 0 {
		store = nil
	}
	return Start(Config{Health: hc, Join: s.Join, Store: store, Logf: logf})
}

// AddFlags defines --gossip, --gossip-join, --gossip-profile and
// --gossip-key-file on fl (the labels' help differs between commands).
func (s *Spec) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&s.Addr, "gossip", "", "IP:PORT to gossip health on, TCP and UDP (e.g. 10.0.0.5:7946; \"\": no gossip)")
	fl.StringSliceVar(&s.Join, "gossip-join", nil,
		"gossip members to join, IP:PORT, comma-separated (default: the members registered in etcd, see --etcd)")
	fl.StringVar(&s.Profile, "gossip-profile", "lan",
		"gossip failure-detection timing: lan (a dead member is seen in seconds), local (one machine) or test")
	fl.StringVar(&s.KeyFile, "gossip-key-file", "", "file with the pool's AES key in base64, 128, 192 or 256 bits "+
		"(head -c 32 /dev/urandom | base64 > FILE): gossip is encrypted and only members with the key join (\"\": clear text)")
}
