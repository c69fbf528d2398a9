package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/agent"
)

// newLsCmd is `nvstripe ls`: the mappings of the agent and of foreground
// maps on this node.
func newLsCmd(g *globals) *cobra.Command {
	var sock, dir string
	c := &cobra.Command{
		Use:   "ls [--agent SOCKET] [--map-sockets DIR]",
		Short: "List the volumes mapped on this node: device, volume, mode, owner epoch, health",
		Long: "ls lists the mappings of the agent on --agent and of every foreground `nvstripe map` (each\n" +
			"registers on DIR/VOLUME.sock): device, volume, mode (rw/ro), the ownership lease's\n" +
			"epoch, health (ok; degraded: namespaces down, IO served from parity; fenced: the lease was\n" +
			"lost; detached: the kernel device was disconnected by someone else), size and who serves it.\n" +
			"Sockets left by a map process that died are removed. A missing agent is mentioned only when\n" +
			"--agent is given.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rows []agent.Listed
			err := g.bounded(cmd, "the agent or a map process", "--agent", func() error {
				rows = agent.ListMappings(cmd.Context(), sock, dir, cmd.Flags().Changed("agent"), func(w string) { fmt.Fprintln(cmd.ErrOrStderr(), "ls:", w) })
				return nil
			})
			if err != nil {
				return err
			}
			return writeOut(cmd, rows, agent.WriteListed)
		},
	}
	c.Flags().StringVar(&sock, "agent", agent.DefaultSocket, "unix socket of the agent")
	c.Flags().StringVar(&dir, "map-sockets", agent.DefaultMapSocketDir, "directory of the foreground maps' sockets")
	metadataOnly(c)
	return c
}
