package health

import (
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Profile selects memberlist's failure-detection timing.
type Profile uint8

// Profiles, from memberlist's own presets.
const (
	// ProfileLAN is memberlist.DefaultLANConfig: probe every second with a
	// 500ms timeout, suspicion multiplier 4; a dead member is noticed in
	// seconds. The default.
	ProfileLAN Profile = iota
	// ProfileLocal is memberlist.DefaultLocalConfig: shorter timeouts for
	// one machine or a fast, quiet network.
	ProfileLocal
	// ProfileTest is ProfileLocal probing every 100ms with a 50ms timeout
	// and suspicion multiplier 2: a stopped member is seen dead within a
	// second or two on loopback. For tests only.
	ProfileTest
)

// Config configures a Node.
type Config struct {
	// Meta is gossiped to the pool. Required; it must encode within
	// MaxMetaSize.
	Meta Meta
	// Name is the member's name, unique in the pool. Default: Meta.Host for
	// a target, "HOST/ROLE" for other roles.
	Name string
	// BindAddr is the address gossip listens on (TCP and UDP). Default
	// "127.0.0.1"; a daemon passes its real address.
	BindAddr string
	// BindPort is the port. Default 0: memberlist binds TCP to a free port
	// chosen by the kernel, then UDP to the same number, retrying a few
	// times when that number is taken for UDP. Node.Addr reports the port.
	BindPort int
	// Profile is the timing preset. Default ProfileLAN.
	Profile Profile
	// OnEvent, if set, receives every membership change (also this node's
	// own join). Calls come from memberlist's goroutines one at a time,
	// under memberlist's lock: they must return quickly and must not call
	// Join, SetMeta or Leave. Default: none.
	OnEvent func(Member)
	// Key, 16, 24 or 32 bytes (ReadKeyFile), encrypts and authenticates
	// every gossip message (AES-GCM, memberlist's SecretKey): a member
	// without it cannot join, and its messages are dropped. Default nil:
	// gossip in clear text, open to anyone who reaches the port.
	Key []byte
	// Label is put on every message (memberlist's Label, at most 255
	// bytes); messages with another label are dropped, so pools of two
	// clusters on one network stay apart. With Key it is authenticated
	// too. Default "": none.
	Label string
	// Logf receives memberlist's log lines. Default: discarded.
	Logf func(format string, args ...any)
}

// EnsureDefaults fills unset fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.Name == "" {
		c.Name = c.Meta.Host
		if c.Meta.Role != RoleTarget {
			c.Name += "/" + c.Meta.Role.String()
		}
	}
	if c.BindAddr == "" {
		c.BindAddr = "127.0.0.1"
	}
}

// Validate reports a bad Config with ErrInvalid.
func (c *Config) Validate() error {
	if _, err := c.Meta.Encode(); err != nil {
		return err
	}
	switch {
	case c.Meta.Host == "":
		return fmt.Errorf("health config: empty Meta.Host: %w", ErrInvalid)
	case c.BindPort < 0 || c.BindPort > 65535:
		return fmt.Errorf("health config: port %d: %w", c.BindPort, ErrInvalid)
	case c.Profile > ProfileTest:
		return fmt.Errorf("health config: profile %d: %w", c.Profile, ErrInvalid)
	case net.ParseIP(c.BindAddr) == nil:
		return fmt.Errorf("health config: bind address %q is not an IP: %w", c.BindAddr, ErrInvalid)
	case len(c.Label) > memberlist.LabelMaxSize:
		return fmt.Errorf("health config: label of %d bytes, want at most %d: %w", len(c.Label), memberlist.LabelMaxSize, ErrInvalid)
	}
	if err := checkKey(c.Key); err != nil {
		return fmt.Errorf("health config: key: %w", err)
	}
	return nil
}

// Status is a member's state as gossip sees it.
type Status uint8

// Member statuses.
const (
	StatusAlive Status = iota + 1 // joined, updated, or answering probes
	// StatusSuspect: missed probes, not yet declared dead. Node never
	// reports it (memberlist tells delegates of joins and deaths only); the
	// Tracker accepts it from other sources and ignores it.
	StatusSuspect
	// StatusDead: declared dead, or left on purpose (memberlist does not
	// tell the two apart).
	StatusDead
)

// String returns alive, suspect or dead.
func (s Status) String() string {
	switch s {
	case StatusAlive:
		return "alive"
	case StatusSuspect:
		return "suspect"
	case StatusDead:
		return "dead"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Member is one member of the pool. As an event it is the member's new
// status. Meta is empty when the member's metadata did not decode (the
// failure is logged).
type Member struct {
	Name   string
	Addr   string // host:port of its gossip listener
	Status Status
	Meta   Meta
}

// Node is this process's membership in a gossip pool.
type Node struct {
	ml   *memberlist.Memberlist
	del  *delegate
	mu   sync.Mutex // guards down
	down bool       // Shutdown was called
}

// Start validates cfg, binds the listeners and starts gossip. The node is
// alone until Join.
func Start(cfg Config) (*Node, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	del := &delegate{meta: cfg.Meta.clone(), members: map[string]Member{}, onEvent: cfg.OnEvent, logf: cfg.Logf}
	mc := profileConfig(cfg.Profile)
	mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertisePort = cfg.Name, cfg.BindAddr, cfg.BindPort, cfg.BindPort
	// A member restarted on another address (a new port, a new IP) takes its
	// name back as soon as its old incarnation is declared dead. Without
	// this memberlist refuses it ("conflicting address") until the dead
	// entry is reaped, and the pool judges a serving target down meanwhile.
	mc.DeadNodeReclaimTime = time.Nanosecond
	mc.Delegate, mc.Events = del, del
	mc.SecretKey, mc.Label = cfg.Key, cfg.Label
	mc.Logger = log.New(logWriter{del.logfOrDiscard()}, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("health: start %s on %s:%d: %w", cfg.Name, cfg.BindAddr, cfg.BindPort, err)
	}
	return &Node{ml: ml, del: del}, nil
}

func profileConfig(p Profile) *memberlist.Config {
	switch p {
	case ProfileLocal:
		return memberlist.DefaultLocalConfig()
	case ProfileTest:
		c := memberlist.DefaultLocalConfig()
		c.ProbeInterval, c.ProbeTimeout = 100*time.Millisecond, 50*time.Millisecond
		c.SuspicionMult, c.GossipInterval = 2, 20*time.Millisecond
		c.PushPullInterval, c.TCPTimeout = time.Second, 500*time.Millisecond
		return c
	}
	return memberlist.DefaultLANConfig()
}

// Name returns this member's name.
func (n *Node) Name() string { return n.ml.LocalNode().Name }

// Addr returns host:port of this member's gossip listener, the address
// others pass to Join.
func (n *Node) Addr() string { return n.ml.LocalNode().Address() }

// Join contacts the given members (host:port) and merges their view of the
// pool. It returns how many it reached; an error only when none was.
func (n *Node) Join(addrs []string) (int, error) {
	k, err := n.ml.Join(addrs)
	if err != nil {
		return k, fmt.Errorf("health: join %v: %w", addrs, err)
	}
	return k, nil
}

// Members returns the members this node believes alive (suspects
// included), itself included, sorted by name, all with StatusAlive. Meta
// copies are shared with events: do not modify them.
func (n *Node) Members() []Member {
	return n.del.alive()
}

// SetMeta replaces this member's Meta and gossips it, waiting up to
// timeout for the update to go out.
func (n *Node) SetMeta(m Meta, timeout time.Duration) error {
	if _, err := m.Encode(); err != nil {
		return err
	}
	n.del.setMeta(m.clone())
	if err := n.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("health: update meta: %w", err)
	}
	return nil
}

// errShutdown is returned by Leave after Shutdown.
var errShutdown = errors.New("health: node is shut down")

// Leave tells the pool this member is leaving on purpose (others report it
// StatusDead at once instead of after failed probes) and waits up to timeout for that to be gossiped. The node
// keeps its listeners until Shutdown.
func (n *Node) Leave(timeout time.Duration) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return errShutdown
	}
	if err := n.ml.Leave(timeout); err != nil {
		return fmt.Errorf("health: leave: %w", err)
	}
	return nil
}

// Shutdown stops gossip and closes the listeners without telling anyone:
// to the others this member goes silent and is declared dead. Safe to call
// more than once.
func (n *Node) Shutdown() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = true
	if err := n.ml.Shutdown(); err != nil {
		return fmt.Errorf("health: shutdown: %w", err)
	}
	return nil
}
