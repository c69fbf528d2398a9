package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/meta/etcdembed"
)

func newEtcdCmd(g *globals) *cobra.Command {
	var dir, listen, peer string
	c := &cobra.Command{
		Use:   "etcd --dir D [--listen 127.0.0.1:2379]",
		Short: "Run a single-node embedded etcd in the foreground",
		Long: "etcd runs a one-member etcd server with its data in DIR until interrupted, for single-machine\n" +
			"setups. Production clusters should run a replicated etcd and pass --etcd to every command.",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annotationNoSelfTest: "1"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("nvstripe etcd needs --dir")}
			}
			srv, err := etcdembed.Start(cmd.Context(), etcdembed.Options{Dir: dir, ClientAddr: listen, PeerAddr: peer})
			if err != nil {
				return err
			}
			defer srv.Close()
			report(cmd, map[string]string{"endpoint": srv.Endpoints()[0], "dir": dir}, "etcd ready: %s (data in %s)", srv.Endpoints()[0], dir)
			notifyServing(cmd.Context(), g.logger("etcd"))
			return srv.Wait(cmd.Context())
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "data directory (required)")
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:2379", "client address HOST:PORT")
	c.Flags().StringVar(&peer, "peer-listen", "127.0.0.1:2380", "peer (raft) address HOST:PORT")
	return c
}
