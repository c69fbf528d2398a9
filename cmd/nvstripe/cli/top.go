package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/agent/top"
	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/jsonout"
)

// newTopCmd is `nvstripe top`: the volumes mapped on this node, live.
func newTopCmd(g *globals) *cobra.Command {
	var sock, dir string
	var endpoints []string
	var interval time.Duration
	var count int
	c := &cobra.Command{
		Use:   "top [--interval 2s] [--count N] [--metrics HOST:PORT|URL ...] [--agent SOCKET] [--map-sockets DIR]",
		Short: "Show the volumes mapped on this node, live: requests and bytes a second, latency percentiles, QoS waits",
		Long: "top reads the Prometheus metrics of the agent on --agent and of every foreground `nvstripe map`\n" +
			"started with --metrics (or the endpoints --metrics names) every --interval and prints, per\n" +
			"volume: reads and writes a second, bytes read and written a second, the p50, p99 and p99.99\n" +
			"latency of the requests in the interval (without QoS waits; from 9%-wide buckets), the requests\n" +
			"a second the volume's QoS limits delayed, their mean wait, and the limits. The table is\n" +
			"redrawn on a terminal, printed again below otherwise, until interrupted or --count tables.\n" +
			"With -o json it prints one reading (the rates over one interval) as a JSON array and exits.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return config.Usage(fmt.Errorf("--interval %v: give one above 0 (default 2s)", interval))
			}
			warn := func(w string) { fmt.Fprintln(cmd.ErrOrStderr(), "top:", w) }
			urls := metricsURLs(endpoints)
			if len(urls) == 0 {
				err := g.bounded(cmd, "the agent or a map process", "--agent", func() error {
					urls = agent.MetricsEndpoints(cmd.Context(), sock, dir, warn)
					return nil
				})
				if err != nil {
					return err
				}
			}
			out, asJSON := cmd.OutOrStdout(), wantJSON(cmd)
			if asJSON {
				count = 1
			}
			clear := isTerminal(out) && !asJSON
			return top.Watch(cmd.Context(), urls, interval, count, warn, func(rows []top.Row) error {
				if asJSON {
					return jsonout.Write(out, rows)
				}
				if clear {
					fmt.Fprint(out, "\x1b[H\x1b[2J")
				}
				fmt.Fprintln(out, time.Now().Format(time.TimeOnly))
				return top.WriteRows(out, rows)
			})
		},
	}
	fl := c.Flags()
	fl.DurationVar(&interval, "interval", 2*time.Second, "time between readings")
	fl.IntVar(&count, "count", 0, "stop after this many tables (0: until interrupted)")
	fl.StringSliceVar(&endpoints, "metrics", nil, "read these metrics endpoints (HOST:PORT or URL) instead of finding the agent's and the maps'")
	fl.StringVar(&sock, "agent", agent.DefaultSocket, "unix socket of the agent")
	fl.StringVar(&dir, "map-sockets", agent.DefaultMapSocketDir, "directory of the foreground maps' sockets")
	metadataOnly(c)
	return c
}

// metricsURLs turns --metrics values into URLs: HOST:PORT is
// http://HOST:PORT/metrics.
func metricsURLs(eps []string) []string {
	var urls []string
	for _, e := range eps {
		if !strings.Contains(e, "://") {
			e = "http://" + e + "/metrics"
		}
		urls = append(urls, e)
	}
	return urls
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
