package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/volclient"
)

// settled is what `volume settle` reports.
type settled struct {
	Volume string  `json:"volume"`
	Reset  []int64 `json:"reset"` // volume offsets of the 4 KiB blocks reset to zeros
}

func newVolumeSettleCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var o volclient.OpenOptions
	c := &cobra.Command{
		Use:   "settle NAME [--holder H] [--host-nqn NQN] [--host-traddr IP]",
		Short: "Reset to zeros the blocks of an unmapped volume that cannot be read back, saying which",
		Long: "settle is for blocks a crash mid-write and the loss of a namespace left unsettled: the write\n" +
			"log could not tell which version such a block held, so reads of it fail (EIO) rather than\n" +
			"return other bytes, until its stripe is written whole. settle takes the volume (it must not be\n" +
			"mapped: unmap it first), reads every allocated stripe, rewrites each stripe holding a block\n" +
			"that cannot be read back with that block zeroed (the other blocks keep their data), and prints\n" +
			"the volume offset of every 4 KiB block it reset; the data that was there is gone, restore it\n" +
			"from elsewhere if the file system above needs it. The map's log names unsettled blocks as a\n" +
			"recovery or a rebuild finds them; `volume info` counts those a rebuild carried over. Progress goes to stderr. A namespace that cannot be reached\n" +
			"stops it (its blocks are away, not lost): bring it back or let the controller rebuild it first.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, a, volumeNames),
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			var err error
			if o.Namespaces.HostNQN, err = nodeHostNQN(o.Namespaces.HostNQN); err != nil {
				return err
			}
			shown := int64(-1)
			progress := func(done, total int64) {
				if pct := done * 100 / total; pct/10 != shown/10 || done == total {
					shown = pct
					fmt.Fprintf(cmd.ErrOrStderr(), "settle %s: %d of %d stripes read (%d%%)\n", args[0], done, total, pct)
				}
			}
			reset, err := volclient.Settle(cmd.Context(), s, args[0], o, progress)
			if err != nil {
				if len(reset) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "settle %s stopped after resetting the blocks at offsets %v\n", args[0], reset)
				}
				return err
			}
			if wantJSON(cmd) {
				return report(cmd, settled{Volume: args[0], Reset: append([]int64{}, reset...)}, "")
			}
			for _, off := range reset {
				fmt.Fprintf(cmd.OutOrStdout(), "reset block at offset %d (4096 bytes) to zeros\n", off)
			}
			return report(cmd, nil, "volume %s settled: %d blocks reset", args[0], len(reset))
		}),
	}
	c.Flags().StringVar(&o.Holder, "holder", "nvstripe-settle", "the name settle owns the volume under while it runs")
	c.Flags().StringVar(&o.Namespaces.HostNQN, "host-nqn", "", hostNQNUsage)
	c.Flags().StringVar(&o.Namespaces.HostTraddr, "host-traddr", "", volclient.HostTraddrUsage)
	return c
}
