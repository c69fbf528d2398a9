// Package targetd composes the target daemon (`nvstripe target serve`):
// a userspace NVMe/TCP target over file-backed namespaces, its HTTP control
// API, its Prometheus metrics and its member of the health gossip pool. A
// test starts it in-process with Start; the CLI only parses its flags
// (Flags, with their defaults) into Options and prints what Start returns.
package targetd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/health/pool"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nvmeof/target"
	"github.com/nvstripe/nvstripe/nvmeof/target/metrics"
)

// Options configure a target daemon.
type Options struct {
	// Files names the subsystem and its file-backed namespaces.
	Files target.FileSpec
	// HostKeysFile, when set, is read with target.ReadHostKeys into
	// Files.HostKeys.
	HostKeysFile string
	// TLS is the target's NVMe/TCP TLS mode; TLSKeysFile, read with
	// target.ReadTLSKeys, holds the hosts' keys.
	TLS         target.TLSMode
	TLSKeysFile string
	// MaxConnections caps each listener (target.Config.MaxConnections).
	MaxConnections int
	// AuthTimeout bounds a keyed host's queue from Connect to a finished
	// authentication (target.Config.AuthTimeout; 0: its default).
	AuthTimeout time.Duration
	// DeviceQueueDepth is target.Config.DeviceQueueDepth (0: its default).
	DeviceQueueDepth int
	// HostWeights is target.Config.HostWeights.
	HostWeights map[string]int
	// Control, when set, is the address of the HTTP control API;
	// ControlToken is the bearer token its requests must carry, on
	// loopback too. Without one the daemon reads or creates the token
	// file ControlTokenFile (default Files.Dir/ControlTokenName, mode
	// 0600: EnsureControlToken) and serves that token.
	Control, ControlToken, ControlTokenFile string
	// Metrics, when set, is HOST:PORT of the Prometheus metrics listener.
	Metrics string
	// Gossip puts the host in the health gossip pool when Gossip.Addr is
	// set, as host Host (its name in etcd). Store opens the store that finds
	// the pool's seeds and registers this member when Gossip.Join is empty;
	// the daemon opens it at its first use (meta.Lazy) and closes it.
	Gossip pool.Spec
	Host   string
	Store  func(context.Context) (*meta.Store, error)
	// Logf logs the target's events; GossipLogf the gossip loop's.
	Logf, GossipLogf func(format string, args ...any)
}

// Ready is what a started daemon serves; its JSON is the `target serve`
// ready line under -o json.
type Ready struct {
	Control string `json:"control"` // control API address, "" without one
	// ControlTokenFile is the token file the daemon created or read, ""
	// when the token came with the options.
	ControlTokenFile string         `json:"control_token_file,omitempty"`
	Gossip           string         `json:"gossip"`  // gossip address, "" without gossip
	Metrics          string         `json:"metrics"` // metrics address, "" without one
	Ready            bool           `json:"ready"`
	Target           target.Summary `json:"target"`
}

// String is the ready report for people: the target's summary, the other
// listeners, then "ready".
func (r Ready) String() string {
	text := r.Target.String()
	if r.Control != "" {
		text += "\ncontrol: http://" + r.Control
		if r.ControlTokenFile != "" {
			text += " (token in " + r.ControlTokenFile + ")"
		}
	}
	if r.Gossip != "" {
		text += "\ngossip: " + r.Gossip
	}
	if r.Metrics != "" {
		text += "\nmetrics: http://" + r.Metrics + "/metrics"
	}
	return text + "\nready"
}

// Daemon is a started target daemon.
type Daemon struct {
	Target *target.Target
	ready  Ready
	undo   []func() // in the order to run them
}

// Start checks the options (mistakes are target.ErrSpec or pool.ErrSpec,
// found before anything listens), opens the namespace files and starts
// every part. On error nothing is left running.
func Start(ctx context.Context, o Options) (_ *Daemon, err error) {
	if _, err := o.Gossip.TargetMember(o.Host, nil); err != nil {
		return nil, err
	}
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	d := &Daemon{undo: []func(){func() { closeNamespaces(cfg.Subsystems[0].Namespaces, o.Logf) }}}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if o.Control != "" && o.ControlToken == "" { // before anything listens
		if o.ControlToken, err = d.controlToken(o); err != nil {
			return nil, err
		}
	}
	if d.Target, err = target.New(cfg); err != nil {
		return nil, err
	}
	if err := d.Target.Start(ctx); err != nil {
		return nil, err
	}
	d.push(func() { d.Target.Close() })
	if err := d.serve(o); err != nil {
		return nil, err
	}
	d.ready.Ready, d.ready.Target = true, d.Target.Summary()
	return d, nil
}

// flushTimeout bounds the flush of each namespace when the daemon stops.
const flushTimeout = 30 * time.Second

// closeNamespaces writes out and closes the namespaces, once the target no
// longer serves them. The target advertises a volatile write cache, and
// stopping the daemon shuts its controllers down, which writes that cache
// out (as a host's shutdown notification does): a write acknowledged
// without a Flush then survives a power loss after the stop.
func closeNamespaces(nss []target.NamespaceConfig, logf func(string, ...any)) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	for _, ns := range nss {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		if err := ns.Device.Flush(ctx); err != nil {
			logf("namespace %s: flush at stop: %v", ns.Name, err)
		}
		cancel()
	}
	if err := target.CloseNamespaces(nss); err != nil {
		logf("closing namespaces: %v", err)
	}
}

// config turns the options into the target's configuration, with the
// namespace files open.
func (o Options) config() (target.Config, error) {
	if o.HostKeysFile != "" {
		keys, err := target.ReadHostKeys(o.HostKeysFile)
		if err != nil {
			return target.Config{}, fmt.Errorf("--host-keys: %w", err)
		}
		o.Files.HostKeys = keys
	}
	cfg, err := o.Files.Config()
	if err != nil {
		return cfg, err
	}
	cfg.MaxConnections, cfg.AuthTimeout, cfg.Logf = o.MaxConnections, o.AuthTimeout, o.Logf
	cfg.DeviceQueueDepth, cfg.HostWeights = o.DeviceQueueDepth, o.HostWeights
	if cfg.TLS = o.TLS; o.TLSKeysFile != "" {
		if cfg.TLSKeys, err = target.ReadTLSKeys(o.TLSKeysFile); err != nil {
			return cfg, fmt.Errorf("--tls-keys: %w", err)
		}
	}
	return cfg, nil
}

// serve starts the control API, the metrics and the gossip member that o
// asks for.
func (d *Daemon) serve(o Options) error {
	if o.Control != "" {
		addr, stop, err := d.Target.ServeControl(o.Control, o.ControlToken)
		if err != nil {
			return err
		}
		d.push(stop)
		d.ready.Control = addr
	}
	if o.Metrics != "" {
		addr, stop, err := metrics.Serve(o.Metrics, d.Target)
		if err != nil {
			return err
		}
		d.push(stop)
		d.ready.Metrics = addr
	}
	var names []string
	for _, ns := range d.Target.Summary().Subsystems[0].Namespaces {
		names = append(names, ns.Name)
	}
	leave, addr, err := Gossip(o.Gossip, o.Host, names, o.Store, o.GossipLogf)
	if err != nil || addr == "" {
		return err
	}
	d.push(leave)
	d.ready.Gossip = addr
	return nil
}

// controlToken is the token in the control token file, created when
// missing.
func (d *Daemon) controlToken(o Options) (string, error) {
	path := o.ControlTokenFile
	if path == "" {
		path = filepath.Join(o.Files.Dir, ControlTokenName)
	}
	d.ready.ControlTokenFile = path
	return EnsureControlToken(path)
}

// Gossip starts the gossip member of a target host whose target nvstripe
// does not run (`nvstripe target agent`, beside a kernel nvmet or SPDK
// target; pool.Spec.StartTarget), with the store opened at its first use.
// It returns the function that leaves the pool, and the gossip address
// ("" without spec.Addr).
func Gossip(spec pool.Spec, host string, names []string, open func(context.Context) (*meta.Store, error),
	logf func(string, ...any)) (leave func(), addr string, err error) {
	store := meta.NewLazy(open)
	var find func(context.Context) (*meta.Store, error) // nil without a store: no seeds looked up or registered
	if open != nil {
		find = store.Open
	}
	m, err := spec.StartTarget(host, names, find, logf)
	if err != nil || m == nil {
		store.Close()
		return func() {}, "", err
	}
	return func() { m.Leave(); store.Close() }, m.Addr(), nil
}

// push adds a step to Close, run before the earlier ones.
func (d *Daemon) push(f func()) { d.undo = append([]func(){f}, d.undo...) }

// Ready says what the daemon serves.
func (d *Daemon) Ready() Ready { return d.ready }

// Close leaves the gossip pool, stops the listeners and the target, and
// flushes and closes the namespace files.
func (d *Daemon) Close() {
	for _, f := range d.undo {
		f()
	}
	d.undo = nil
}

// IsSpec says whether err is an operator's mistake in the options.
func IsSpec(err error) bool {
	return errors.Is(err, target.ErrSpec) || errors.Is(err, pool.ErrSpec) || errors.Is(err, config.ErrSecret)
}
