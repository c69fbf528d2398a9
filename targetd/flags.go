package targetd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/health/pool"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// Flags are the flags of `nvstripe target serve`, with their defaults
// (AddFlags); Options turns them into the daemon's Options.
type Flags struct {
	Dir, Listen, NQN                  string
	Namespaces, ANAGroups, AllowHosts []string
	BlockSize                         int64
	MaxConnections                    int
	DeviceQueueDepth                  int           // --device-queue-depth
	HostWeights                       []string      // --host-weight NQN=W
	AuthTimeout                       time.Duration // --auth-timeout
	Metrics                           string        // --metrics-listen
	Control, ControlTokenFile         string
	HostKeys                          string // --host-keys
	TLS, TLSKeys                      string // --tls, --tls-keys
	Host                              string // this host's name in etcd, for gossip
	Gossip                            pool.Spec
}

// AddFlags defines the flags on fl.
func (f *Flags) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.Dir, "dir", "", "directory holding the namespace files (required)")
	fl.StringVar(&f.Listen, "listen", "127.0.0.1:4420", "listen addresses, comma-separated")
	fl.StringVar(&f.NQN, "nqn", "", "subsystem NQN (required)")
	fl.StringArrayVar(&f.Namespaces, "ns", nil, "namespace NAME:SIZE (e.g. data0:10GiB), repeatable")
	fl.StringArrayVar(&f.ANAGroups, "ana-group", nil, "ANA group of a namespace, NAME:GROUP, repeatable")
	fl.StringArrayVar(&f.AllowHosts, "allow-host", nil, "host NQN admitted on its claim alone, unauthenticated, or 'any' (every host, for demos); repeatable; this or --host-keys is required")
	f.BlockSize = 4096
	fl.Var(units.NewFlag(&f.BlockSize), "block-size", "logical block size of new namespaces")
	fl.IntVar(&f.MaxConnections, "max-connections", target.DefaultMaxConnections,
		"connections each listener serves at once; one beyond is closed at once (negative: no cap)")
	fl.IntVar(&f.DeviceQueueDepth, "device-queue-depth", 32,
		"I/O commands each namespace runs on its file at once; the rest wait in one queue per controller, served in weighted turns")
	fl.StringArrayVar(&f.HostWeights, "host-weight", nil,
		"HOSTNQN=W: that host's controllers get W times the others' share of each namespace's device (1-100; others 1), repeatable")
	fl.DurationVar(&f.AuthTimeout, "auth-timeout", 5*time.Second,
		"time a queue of a --host-keys host has from Connect to finish authenticating before it is closed")
	fl.StringVar(&f.Metrics, "metrics-listen", "", "serve Prometheus metrics (per-namespace IO, connections, refusals) on HOST:PORT/metrics")
	fl.StringVar(&f.Control, "control", "", "serve the HTTP control API on this address (e.g. 127.0.0.1:4480); every request needs the token (--control-token-file, or DIR/"+ControlTokenName+", created mode 0600)")
	fl.StringVar(&f.HostKeys, "host-keys", "", "file (mode 0600) of the hosts admitted only once they authenticate (DH-HMAC-CHAP), without --allow-host: lines 'HOSTNQN DHHC-1:... [CTRL-DHHC-1:...]' (gen-dhchap-key; a controller secret makes it bidirectional)")
	fl.StringVar(&f.TLS, "tls", "off", "NVMe/TCP TLS 1.3 with a PSK: off, on (TLS for hosts that open with it, plaintext for the others) or require")
	fl.StringVar(&f.TLSKeys, "tls-keys", "", "file of the hosts' TLS keys for --tls: lines 'HOSTNQN NVMeTLSkey-1:...' (gen-tls-key)")
	fl.StringVar(&f.ControlTokenFile, "control-token-file", "", "file holding the bearer token every control API request must carry (default: DIR/"+ControlTokenName+", created when missing)")
	fl.StringVar(&f.Host, "host", "", "this host's name in etcd (nvstripe host add), gossiped with --gossip")
	fl.StringArrayVar(&f.Gossip.Labels, "label", nil, "failure-domain label KEY=VALUE gossiped with --gossip, repeatable")
	f.Gossip.AddFlags(fl)
}

// Options turns the flags into the daemon's Options, reading the control
// API's token file when one is named (only with --control; without one
// Start reads or creates DIR/ControlTokenName). Start checks the rest.
func (f *Flags) Options() (Options, error) {
	token := ""
	if f.Control != "" && f.ControlTokenFile != "" {
		var err error
		if token, err = config.ReadSecretFile("--control-token-file", f.ControlTokenFile); err != nil {
			return Options{}, err
		}
	}
	tls, err := target.ParseTLSMode(f.TLS)
	if err != nil {
		err = fmt.Errorf("--tls: %w", err)
	} else if tls != target.TLSOff && f.TLSKeys == "" {
		err = fmt.Errorf("--tls=%v needs --tls-keys FILE (the hosts' keys)", tls)
	} else if tls == target.TLSOff && f.TLSKeys != "" {
		err = errors.New("--tls-keys without --tls=on or --tls=require")
	}
	if err != nil {
		return Options{}, config.Usage(err)
	}
	weights, err := hostWeights(f.HostWeights)
	if err != nil {
		return Options{}, err
	}
	return Options{HostWeights: weights, TLS: tls, TLSKeysFile: f.TLSKeys, Files: target.FileSpec{Dir: f.Dir, NQN: f.NQN, Listen: strings.Split(f.Listen, ","), Namespaces: f.Namespaces,
		ANAGroups: f.ANAGroups, AllowHosts: f.AllowHosts, BlockSize: int(f.BlockSize)}, HostKeysFile: f.HostKeys,
		MaxConnections: f.MaxConnections, DeviceQueueDepth: f.DeviceQueueDepth, AuthTimeout: f.AuthTimeout, Control: f.Control, ControlToken: token, Metrics: f.Metrics, Gossip: f.Gossip, Host: f.Host}, nil
}

// hostWeights parses --host-weight values (HOSTNQN=W).
func hostWeights(vals []string) (map[string]int, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	m := map[string]int{}
	for _, v := range vals {
		nqn, w, ok := strings.Cut(v, "=")
		n, err := strconv.Atoi(w)
		if !ok || nqn == "" || err != nil || n < 1 || n > 100 {
			return nil, config.Usage(fmt.Errorf("--host-weight %q: want HOSTNQN=W with W from 1 to 100", v))
		}
		m[nqn] = n
	}
	return m, nil
}
