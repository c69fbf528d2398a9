package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/csi"
	"github.com/nvstripe/nvstripe/meta"
)

// newCSICmd is `nvstripe csi`: the Kubernetes CSI driver, in the
// foreground.
func newCSICmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	var endpoint, mode, tlsKeyFile string
	o := csi.Options{}
	c := &cobra.Command{
		Use:   "csi --endpoint unix://PATH --node-id ID [--agent SOCKET] [--mode all|controller|node]",
		Short: "Run the Kubernetes CSI driver (identity, controller and node services) on a unix socket",
		Long: "csi serves the CSI services of driver " + csi.DriverName + " on --endpoint until interrupted.\n" +
			"The controller service creates, deletes, expands and lists volumes and reports capacity in\n" +
			"etcd (the paths of 'volume create|rm|resize|ls' and 'df'); the node service maps volumes\n" +
			"through this node's agent (--agent): ublk where loaded, else nbd, else the agent's FUSE file\n" +
			"with a loop device over it; it makes a filesystem only on a blank device. --mode controller\n" +
			"for the controller Deployment, --mode node for the node DaemonSet. StorageClass parameters:\n" +
			"k, m, checksums, writeLog, failureDomain and the QoS limits qosIOPS, qosReadIOPS, qosWriteIOPS,\n" +
			"qosBPS, qosReadBPS, qosWriteBPS, qosBurst (values as 'volume create --qos-*' takes them); a\n" +
			"VolumeAttributesClass's qos* parameters change a live volume's limits (ControllerModifyVolume).\n" +
			"The NVMe/TCP TLS key goes to the agent (nvstripe agent --tls-key-file), which maps the volumes.",
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if tlsKeyFile != "" {
				return usageError{errors.New("--tls-key-file belongs to the agent (nvstripe agent --tls-key-file): " +
					"the node service maps volumes through it and the driver opens no NVMe/TCP connection itself")}
			}
			return nil
		},
		RunE: serveWithStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			if endpoint == "" {
				return usageError{errors.New("nvstripe csi needs --endpoint unix://PATH")}
			}
			switch mode {
			case "all":
			case "controller":
				o.Controller = true
			case "node":
				o.Node = true
			default:
				return usageError{fmt.Errorf("--mode %q: want all, controller or node", mode)}
			}
			if mode != "controller" && o.NodeID == "" {
				return usageError{errors.New("the node service needs --node-id (the Kubernetes node name)")}
			}
			o.Store, o.Log = s, g.logger("csi")
			d, err := csi.New(o)
			if err != nil {
				return usageError{err}
			}
			return d.Serve(cmd.Context(), endpoint, func(path string) {
				report(cmd, map[string]string{"driver": csi.DriverName, "endpoint": path, "mode": mode},
					"csi driver %s (%s) on %s", csi.DriverName, mode, path)
			})
		}),
	}
	a.AddFlags(c.PersistentFlags())
	fl := c.Flags()
	fl.StringVar(&endpoint, "endpoint", "", "unix socket to serve the CSI services on: unix:///PATH (required)")
	fl.StringVar(&o.NodeID, "node-id", "", "this node's id, the Kubernetes node name (required unless --mode controller)")
	fl.StringVar(&o.Agent, "agent", agent.DefaultSocket, "unix socket of this node's agent")
	fl.StringVar(&o.StateDir, "state-dir", csi.DefaultStateDir, "directory of the FUSE mounts of the loop-device way of mapping")
	fl.StringVar(&mode, "mode", "all", "services to serve: all, controller or node")
	fl.StringVar(&o.Frontend, "frontend", csi.FrontendAuto, "how volumes are mapped: \"\" (ublk, else nbd, else FUSE + loop) or fuse")
	// Taken only to say where the key goes instead of "unknown flag".
	fl.StringVar(&tlsKeyFile, "tls-key-file", "", "not taken: give the NVMe/TCP TLS key to the agent")
	fl.MarkHidden("tls-key-file")
	metadataOnly(c)
	return withPprof(g, c, "csi")
}
