package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/internal/jsonout"
	"github.com/nvstripe/nvstripe/meta"
)

func newAdminScrubCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var wait bool
	c := &cobra.Command{
		Use:   "scrub [VOLUME] [--wait]",
		Short: "Check every block of a volume (all mapped volumes) against its checksums and parity, healing what can be healed",
		Long: "scrub asks the read-write owner of the volume (every volume mapped read-write when none is named)\n" +
			"to read every stripe, verify its checksums and parity, and rewrite bad blocks from the other shards.\n" +
			"It is paced like the controller's moves, resumes where it stopped when the owner restarts, and\n" +
			"shows in `admin status` as a task. It works on etcd directly (not through --controller)." + waitHelp,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeArgs(g, a, volumeNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			return waitError(withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
				res, err := admin.ScrubNamed(cmd.Context(), textOut(cmd), s, args, wait)
				if wantJSON(cmd) {
					return errors.Join(err, jsonout.Write(cmd.OutOrStdout(), res))
				}
				return err
			})(cmd, args))
		},
	}
	c.Flags().BoolVar(&wait, "wait", false, "wait for the scrubs to finish and print what they found")
	return c
}
