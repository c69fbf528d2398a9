package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/internal/jsonout"
	"github.com/nvstripe/nvstripe/meta"
)

func newAdminScrubCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var o admin.ScrubOptions
	c := &cobra.Command{
		Use:   "scrub [VOLUME] [--wait]",
		Short: "Check every block of a volume (all mapped volumes) against its checksums and parity, healing what can be healed",
		Long: "scrub asks the read-write owner of the volume (every volume mapped read-write when none is named)\n" +
			"to read every stripe, verify its checksums and parity, and rewrite bad blocks from the other shards.\n" +
			"It is paced like the controller's moves, resumes where it stopped when the owner restarts, and\n" +
			"shows in `admin status` as a task. It works on etcd directly (not through --controller).\n" +
			"With --wait, an owner seen not to map the volume (an agent restarting) is waited for up to\n" +
			"--owner-grace to map it again, and the scrub goes on there; then the wait ends blocked. A named\n" +
			"volume nobody maps read-write is waited for as long, then refused." + waitHelp,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeArgs(g, a, volumeNames),
		PreRunE: func(*cobra.Command, []string) error {
			if o.OwnerGrace <= 0 {
				return config.Usage(fmt.Errorf("--owner-grace %v: give how long a wait waits for the scrub's owner to map the volume again, above 0 (default %v)",
					o.OwnerGrace, admin.DefaultOwnerGrace))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return waitError(withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
				res, err := admin.ScrubNamed(cmd.Context(), textOut(cmd), s, args, o)
				if wantJSON(cmd) {
					return errors.Join(err, jsonout.Write(cmd.OutOrStdout(), res))
				}
				return err
			})(cmd, args))
		},
	}
	c.Flags().BoolVar(&o.Wait, "wait", false, "wait for the scrubs to finish and print what they found")
	c.Flags().DurationVar(&o.OwnerGrace, "owner-grace", admin.DefaultOwnerGrace, "with --wait, how long to wait for a scrub's owner to map its volume again (an agent restarting) before the wait is blocked")
	return c
}
