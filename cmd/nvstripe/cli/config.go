package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/jsonout"
)

// applyConfig resolves the shared settings (config.Apply) and sets every
// flag of cmd that names one and was not given on the command line.
func applyConfig(cmd *cobra.Command, g *globals) (err error) {
	g.settings, g.configFile, err = config.Apply(g.configPath, config.FlagSet(cmd.Flags()), os.LookupEnv)
	return err
}

func newConfigCmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	var hostNQN string
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the shared settings and where each came from (flag, environment, file, default)",
		Long: "show prints the settings every command shares: etcd endpoints and TLS files, the cluster\n" +
			"name and the host NQN. A flag beats its environment variable (NVSTRIPE_ETCD, NVSTRIPE_ETCD_CACERT,\n" +
			"NVSTRIPE_ETCD_CERT, NVSTRIPE_ETCD_KEY, NVSTRIPE_CLUSTER, NVSTRIPE_HOST_NQN), which beats the\n" +
			"config file (--config, else $NVSTRIPE_CONFIG, else " + config.DefaultPath + "), which beats\n" +
			"the default. The host NQN's default is this node's (see 'nvstripe host-identity'):\n" +
			"/etc/nvme/hostnqn, else /etc/nvstripe/hostnqn, else one generated there on first use.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nqn, source := nodeHostNQNSource(nodeIdentityDirs())
			vs := config.WithDefault(g.settings, "host_nqn", nqn, source)
			if wantJSON(cmd) {
				return jsonout.Write(cmd.OutOrStdout(), map[string]any{"config_file": g.configFile, "settings": vs})
			}
			return config.WriteSettings(cmd.OutOrStdout(), vs)
		},
	}
	show.Flags().StringVar(&hostNQN, "host-nqn", "", "NVMe host NQN (env NVSTRIPE_HOST_NQN)")
	c := groupCmd("config", "Show the shared settings (etcd, cluster, host NQN) and their sources", show)
	a.AddFlags(c.PersistentFlags())
	metadataOnly(show)
	return c
}
