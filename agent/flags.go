package agent

import (
	"github.com/spf13/pflag"

	"github.com/nvstripe/nvstripe/volclient"
)

// AddFlags defines the flags of `nvstripe agent` that set o, with their
// defaults (the etcd, host NQN and NodeFlags ones are separate).
func (o *ServeOptions) AddFlags(fl *pflag.FlagSet) {
	fl.StringVar(&o.Socket, "socket", DefaultSocket, "unix socket of the agent's gRPC API")
	fl.StringVar(&o.StateDir, "state-dir", DefaultStateDir, "directory of the agent's local state (the mappings to restore)")
	fl.StringVar(&o.MetricsAddr, "metrics", DefaultMetricsAddr, "HOST:PORT of the Prometheus metrics listener (\"\": off)")
	fl.StringVar(&o.Holder, "holder", "", "owner name in etcd (default agent.HOSTNAME, or agent.node-ID on hosts without a valid one)")
	fl.DurationVar(&o.LeaseTTL, "lease-ttl", 0, "ownership lease TTL: how long volumes are served while etcd is unreachable (default 10s)")
	fl.DurationVar(&o.RecheckInterval, "recheck-interval", 0, "how often namespaces that are down are probed, to be used again once they answer (default 10s)")
	fl.IntVar(&o.Report.FailNamespaceAfter, "fail-namespace-after", 1, "media errors after which a namespace is reported failed in etcd (-1: never)")
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
	o.NBDTLS, o.NBDRequireTLS, err = f.NBDTLS.Config()
	return err
}
