package cli

import (
	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/internal/pprofhttp"
)

// withPprof gives the daemon command c --pprof ADDR and --pprof-any
// (pprofhttp.Flags): while c runs, Go's runtime profiles of the process are
// served on ADDR, which must be loopback unless --pprof-any. A bad address
// is a usage error before c starts anything.
func withPprof(g *globals, c *cobra.Command, component string) *cobra.Command {
	var f pprofhttp.Flags
	f.AddFlags(c.Flags())
	run := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if f.Addr != "" {
			if err := pprofhttp.CheckAddr(cmd.Context(), f.Addr, f.Any); err != nil {
				return usageError{err}
			}
		}
		s, err := pprofhttp.Start(cmd.Context(), f)
		if err != nil {
			return err
		}
		if s != nil {
			defer s.Close()
			g.logger(component).Info("serving runtime profiles", "url", "http://"+s.Addr()+"/debug/pprof/")
		}
		return run(cmd, args)
	}
	return c
}
