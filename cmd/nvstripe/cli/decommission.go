package cli

import (
	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/meta"
)

func newNSRmCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NS",
		Short: "Remove (decommission) a namespace that holds no slot",
		Long: "rm removes the namespace's records from etcd. It is refused while the namespace holds slots\n" +
			"(the error says how many): drain it first ('nvstripe admin drain NS --wait' ends with it\n" +
			"drained), or let the rebuild of an out or failed namespace finish. The target is not touched.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, a, namespaceIDs),
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			if err := s.RemoveNamespace(cmd.Context(), args[0]); err != nil {
				return err
			}
			return report(cmd, map[string]string{"namespace": args[0], "removed": "yes"}, "namespace %s removed", args[0])
		}),
	}
}

func newHostRmCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "rm NAME [--force]",
		Short: "Remove (decommission) a host",
		Long: "rm removes the host from etcd. A host with namespaces is refused; with --force its namespaces\n" +
			"are removed with it, in one transaction, provided none holds a slot (drain them first).",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, a, hostNames),
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			ids, err := s.RemoveHost(cmd.Context(), args[0], force)
			if err != nil {
				return err
			}
			return report(cmd, map[string]any{"host": args[0], "namespaces_removed": ids},
				"host %s removed, with %d namespaces", args[0], len(ids))
		}),
	}
	c.Flags().BoolVar(&force, "force", false, "also remove the host's namespaces (each must hold no slot)")
	return c
}
