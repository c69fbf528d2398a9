package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/demo"
)

// newDemoCmd is `nvstripe demo`: the whole system in one process.
func newDemoCmd(*globals) *cobra.Command {
	var o demo.Options
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run everything in one process: etcd, NVMe/TCP targets, a 4+2 volume served over NBD",
		Long: "demo starts an embedded etcd, --targets userspace NVMe/TCP targets on 127.0.0.1 with\n" +
			"file-backed namespaces under --dir (a temporary directory by default), creates a k+m\n" +
			"volume over them and serves it over NBD (and as a FUSE file with --fuse DIR). It prints\n" +
			"\"ready: nbd://HOST:PORT/NAME\" once serving and runs until interrupted. Try:" + demoExamples(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wantJSON(cmd) {
				return usageError{errors.New("demo narrates for people: -o json is not supported (script the real commands)")}
			}
			o.Out = cmd.OutOrStdout()
			return demo.Run(cmd.Context(), o)
		},
	}
	o.AddFlags(c.Flags())
	return c
}

// demoExamples lists demo.Examples for the default URL, one per line.
func demoExamples() string {
	var b strings.Builder
	for _, e := range demo.Examples(demo.DefaultURL, "1G", "/tmp/fill") {
		fmt.Fprintf(&b, "\n  %s   (%s)", e.Command, e.Says)
	}
	return b.String()
}
