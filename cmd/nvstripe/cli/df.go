package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/capacity"
	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/jsonout"
	"github.com/nvstripe/nvstripe/meta"
)

func newDfCmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	c := &cobra.Command{
		Use:   "df",
		Short: "Show raw, usable, allocated and promised space per failure domain",
		Long: "df sums the namespaces per failure domain: raw (slots of namespaces taking shards), usable (what\n" +
			"the widest volume layout can fill, one shard per domain and segment), allocated (slots holding\n" +
			"shards) and promised (the volumes' sizes after parity, shared out by usable space). Overcommit\n" +
			"is promised over usable; 'volume create' warns past 1 and refuses past the cluster's limit\n" +
			"('cluster set --max-overcommit', default 2).",
		Args: cobra.NoArgs,
		RunE: withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			in, limit, err := capacity.Load(cmd.Context(), s)
			if err != nil {
				return err
			}
			r, err := capacity.Compute(in)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return jsonout.Write(cmd.OutOrStdout(), map[string]any{"space": r, "max_overcommit": limit})
			}
			return capacity.WriteTable(cmd.OutOrStdout(), r, limit)
		}),
	}
	addEtcdFlags(g, c, a)
	metadataOnly(c)
	return c
}

func newClusterSetCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var ratio float64
	c := &cobra.Command{
		Use:   "set --max-overcommit R",
		Short: "Change a cluster setting: the overcommit limit of thin volumes",
		Long: "--max-overcommit R (1 to 1000, default 2) caps what thin volumes may promise: their sizes after\n" +
			"parity over the usable space ('nvstripe df'). 'volume create' refuses a volume beyond it.",
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("max-overcommit") {
				return usageError{errors.New("cluster set needs --max-overcommit")}
			}
			if err := meta.CheckOvercommit(ratio); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			rec, err := s.SetMaxOvercommit(cmd.Context(), ratio)
			if err != nil {
				return err
			}
			return report(cmd, rec, "cluster %s: max overcommit %g", rec.Name, rec.OvercommitLimit())
		}),
	}
	c.Flags().Float64Var(&ratio, "max-overcommit", meta.DefaultMaxOvercommit, "most thin volumes may promise, as a multiple of the usable space")
	return c
}
