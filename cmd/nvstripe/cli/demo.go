package cli

import (
	"errors"
	"os"

	"github.com/nvstripe/nvstripe/demo"
	"github.com/nvstripe/nvstripe/units"
	"github.com/spf13/cobra"
)

// newDemoCmd is `nvstripe demo`: the whole system in one process.
func newDemoCmd(*globals) *cobra.Command {
	var o demo.Options
	size := int64(4 << 30)
	var keep bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run everything in one process: etcd, NVMe/TCP targets, a 4+2 volume served over NBD",
		Long: "demo starts an embedded etcd, --targets userspace NVMe/TCP targets on 127.0.0.1 with\n" +
			"file-backed namespaces under --dir (a temporary directory by default), creates a k+m\n" +
			"volume over them and serves it over NBD (and as a FUSE file with --fuse DIR). It prints\n" +
			"\"ready: nbd://HOST:PORT/NAME\" once serving and runs until interrupted. Try:\n" +
			"  nbdinfo nbd://127.0.0.1:10809/demo\n" +
			"  nbdcopy --progress /dev/urandom nbd://127.0.0.1:10809/demo   (fills it)",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wantJSON(cmd) {
				return usageError{errors.New("demo narrates for people: -o json is not supported (script the real commands)")}
			}
			o.Size, o.Out = size, cmd.OutOrStdout()
			if o.Dir == "" {
				var err error
				if o.Dir, err = os.MkdirTemp("", "nvstripe-demo-"); err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(o.Dir)
				}
			}
			return demo.Run(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Dir, "dir", "", "directory for etcd data and namespace files (default: a new temporary directory, removed at exit)")
	f.BoolVar(&keep, "keep", false, "keep the temporary directory at exit")
	f.IntVar(&o.Targets, "targets", 0, "number of userspace NVMe/TCP targets, one host each (default 6, 7 with --chaos)")
	f.BoolVar(&o.Chaos, "chaos", false, "after ready: stop a target, show degraded reads, rebuild its shards, verify")
	f.IntVar(&o.K, "k", 4, "data shards per stripe")
	f.IntVar(&o.M, "m", 2, "parity shards per stripe")
	f.Var(units.NewFlag(&size), "size", "volume size")
	f.StringVar(&o.NBDListen, "nbd-listen", "127.0.0.1:10809", "NBD listener address")
	f.StringVar(&o.FUSEDir, "fuse", "", "also show the volume as a file in a FUSE mount at this directory")
	return c
}
