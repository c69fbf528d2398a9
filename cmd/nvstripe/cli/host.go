package cli

import (
	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/meta"
)

func newHostCmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	c := groupCmd("host", "Storage hosts and their failure-domain labels: add, list, remove", newHostAddCmd(g, a), newHostLsCmd(g, a), newHostRmCmd(g, a))
	addEtcdFlags(g, c, a)
	metadataOnly(c.Commands()...)
	return c
}

func newHostAddCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var labels []string
	var lm map[string]string
	c := &cobra.Command{
		Use:   "add NAME [--label rack=r1 ...]",
		Short: "Add a storage host",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) (err error) {
			if lm, err = meta.ParseLabels(labels); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			h, err := s.AddHost(cmd.Context(), args[0], lm)
			if err != nil {
				return err
			}
			return report(cmd, h, "host %s added", h.Name)
		}),
	}
	c.Flags().StringArrayVar(&labels, "label", nil, "failure-domain label KEY=VALUE, repeatable")
	return c
}

func newHostLsCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	return readCmd(g, a, "ls", "List hosts", (*meta.Store).Hosts, meta.WriteHosts)
}
