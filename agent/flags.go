package agent

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/volclient"
)

// AddFlags defines the flags of `nvstripe agent` that set o, with their
// defaults (the etcd, host NQN and NodeFlags ones are separate).
func (o *ServeOptions) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&o.Socket, "socket", DefaultSocket, "unix socket of the agent's gRPC API")
	fl.StringVar(&o.StateDir, "state-dir", DefaultStateDir, "directory of the agent's local state (the mappings to restore)")
	fl.StringVar(&o.MetricsAddr, "metrics", DefaultMetricsAddr, "HOST:PORT of the Prometheus metrics listener (\"\": off)")
	fl.StringVar(&o.Holder, "holder", "", "owner name in etcd (default agent.HOSTNAME, or agent.node-ID on hosts without a valid one)")
	fl.DurationVar(&o.LeaseTTL, "lease-ttl", 0, "ownership lease TTL: how long volumes are served while etcd is unreachable (default 10s, at least 2s)")
	fl.DurationVar(&o.RecheckInterval, "recheck-interval", 0, "how often namespaces that are down are probed, to be used again once they answer (default 10s)")
	fl.IntVar(&o.Report.FailNamespaceAfter, "fail-namespace-after", 1, "media errors after which a namespace is reported failed in etcd (1 or more; -1: never)")
}

// NodeFlags are the flags `nvstripe agent` and `nvstripe map` share: the
// DH-HMAC-CHAP secret files and the NBD listener's TLS.
type NodeFlags struct {
	DHCHAP volclient.DHCHAPFiles
	NBDTLS NBDTLSFlags
}

// AddFlags defines the flags on fl.
func (f *NodeFlags) AddFlags(fl *pflag.FlagSet) {
	f.DHCHAP.AddFlags(fl)
	f.NBDTLS.AddFlags(fl)
}

// Apply loads the secrets and the TLS configuration into o; mistakes are
// config.IsUsage.
func (f *NodeFlags) Apply(o *Options) (err error) {
	if o.Namespaces.DHCHAPSecret, o.Namespaces.DHCHAPCtrlSecret, err = f.DHCHAP.Load(); err != nil {
		return err
	}
	if o.Namespaces.TLSKey, err = f.DHCHAP.TLSKey(); err != nil {
		return err
	}
	o.NBDTLS, o.NBDRequireTLS, err = f.NBDTLS.Config()
	return err
}

// MapFlags are the flags of `nvstripe map` but --agent, --host-nqn and the
// etcd ones: the request, how a foreground map serves it, and NodeFlags.
type MapFlags struct {
	Request    api.MapRequest
	Foreground ForegroundOptions // Agent.Namespaces.HostNQN is the caller's
	Node       NodeFlags
}

// AddFlags defines the flags on fl, with their defaults.
func (f *MapFlags) AddFlags(fl *pflag.FlagSet) {
	req, fg := &f.Request, &f.Foreground
	fl.StringVar(&req.NbdListen, "nbd-listen", "", "serve over NBD on HOST:PORT or unix:/PATH")
	fl.StringVar(&req.NbdDevice, "nbd", "", "attach to the kernel nbd device /dev/nbdN (default: the first free one)")
	fl.BoolVar(&req.Ublk, "ublk", false, "serve as /dev/ublkbN through the kernel's ublk driver")
	fl.StringVar(&req.FuseDir, "fuse", "", "show the volume as the file DIR/NAME in a FUSE mount")
	fl.BoolVar(&req.ReadOnly, "read-only", false, "map read-only (shared read-only lease)")
	fl.StringVar(&fg.Agent.Holder, "holder", "", "owner name in etcd when serving in the foreground (default map.HOSTNAME, or map.node-ID on hosts without a valid one)")
	fl.StringVar(&fg.ListDir, "map-sockets", DefaultMapSocketDir, "directory where a foreground map serves its state to nvstripe ls (\"\": none)")
	fl.StringVar(&fg.MetricsAddr, "metrics", "", "HOST:PORT of a Prometheus metrics listener when serving in the foreground (\"\": none)")
	fl.BoolVar(&fg.WaitSize, "wait", true, "print a kernel device only once the kernel reports its capacity")
	fl.DurationVar(&fg.Agent.LeaseTTL, "lease-ttl", 0, "ownership lease TTL when serving in the foreground: how long the volume stays owned after this process stops renewing (default 10s, at least 2s)")
	f.Node.AddFlags(fl)
}

// Spec completes the request of volume (CompleteRequest) and checks it:
// the mapping's Spec, and the kernel device chosen and why ("" when the
// flags named the frontend). Mistakes in the flags are config.IsUsage.
func (f *MapFlags) Spec(volume string) (Spec, string, error) {
	f.Request.Volume = volume
	chose, err := CompleteRequest(&f.Request)
	if err != nil {
		return Spec{}, "", err
	}
	spec, err := SpecOf(&f.Request)
	return spec, chose, config.Usage(err)
}

// CheckForeground loads NodeFlags into the foreground agent's options and
// checks that this machine can serve spec with them (CheckForeground).
func (f *MapFlags) CheckForeground(spec Spec) error {
	if err := f.Node.Apply(&f.Foreground.Agent); err != nil {
		return err
	}
	err := CheckForeground(spec, f.Foreground.Agent)
	if errors.Is(err, ErrTLSNotExport) {
		return config.Usage(err)
	}
	return err
}
