// Package cli is nvstripe's command line: Run parses arguments with cobra,
// calls the libraries and prints results. It holds no logic of its own and
// no state between calls: every Run builds a fresh command tree, so tests run
// it in-process, concurrently if they like.
//
// Adding a verb group: write newXxxCmd(g *globals) *cobra.Command in its own
// file (volume.go, target.go, ...) and add one line to verbGroups below.
// Commands read flags into local variables, take their context from
// cmd.Context(), print to cmd.OutOrStdout() and return errors (never exit).
// Do not set PersistentPreRun(E) on a verb group: it would replace the root's
// start-up self-test; use PreRunE.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/ec"
	"github.com/nvstripe/nvstripe/internal/logging"
)

// verbGroups lists the constructors of the top-level commands, one line each.
func verbGroups() []func(*globals) *cobra.Command {
	return []func(*globals) *cobra.Command{
		newVersionCmd,
		newSelfTestCmd,
		newTargetCmd,
		newDemoCmd,
		newClusterCmd,
		newHostCmd,
		newNamespaceCmd,
		newVolumeCmd,
		newDfCmd,
		newEtcdCmd,
		newControllerCmd,
		newAdminCmd,
		newAgentCmd,
		newMapCmd,
		newCSICmd,
		newUnmapCmd,
		newLsCmd,
		newTopCmd,
		newConfigCmd,
		newHostIdentityCmd,
		newGenDHCHAPKeyCmd,
		newGenTLSKeyCmd,
	}
}

// globals are the persistent flags every command sees.
type globals struct {
	// etcd is --etcd: comma-separated etcd client endpoints.
	// Default "127.0.0.1:2379", etcd's own client port.
	etcd string
	// timeout is --timeout: how long a one-shot command waits for etcd,
	// the controller or the agent (bounded).
	timeout time.Duration
	// output is -o/--output: text or json.
	output string
	// logFormat and logLevel are --log-format and --log-level; log is the
	// daemons' logger they make.
	logFormat, logLevel string
	log                 *slog.Logger
	// configPath is --config: the config file (default NVSTRIPE_CONFIG,
	// else config.DefaultPath).
	configPath string
	// settings are the shared settings resolved before the command ran.
	settings []config.Value
	// configFile is the config file read ("" when none was found).
	configFile string
}

// logger returns the daemons' logger for component (agent, map, target, ...).
func (g *globals) logger(component string) *slog.Logger {
	return g.log.With("component", component)
}

// annotationNoSelfTest on a command skips the start-up codec self-test.
const annotationNoSelfTest = "nvstripe/no-selftest"

// Run executes the nvstripe command line args (without the program name),
// writing output to stdout and diagnostics to stderr. It returns the
// command's error; ExitCode maps it to a process exit status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

// newRootCmd builds the whole command tree.
func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "nvstripe",
		Short: "Erasure-coded block volumes striped over NVMe-oF namespaces",
		Long: "nvstripe stripes block volumes over NVMe-oF namespaces with Reed-Solomon erasure coding,\n" +
			"keeps placement in etcd, and serves volumes over NBD or FUSE.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE:          rejectUnknown,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if g.output != "text" && g.output != "json" {
				return usageError{fmt.Errorf("-o %q: want text or json", g.output)}
			}
			var err error
			if g.log, err = logging.New(cmd.ErrOrStderr(), g.logFormat, g.logLevel); err != nil {
				return usageError{err}
			}
			if err := applyConfig(cmd, g); err != nil {
				return err
			}
			return startupSelfTest(cmd, args)
		},
	}
	root.PersistentFlags().StringVar(&g.etcd, "etcd", "127.0.0.1:2379", "etcd endpoints, comma-separated (env NVSTRIPE_ETCD)")
	root.PersistentFlags().StringVar(&g.configPath, "config", "", "config file (default $NVSTRIPE_CONFIG, else "+config.DefaultPath+")")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	root.PersistentFlags().Bool("json", false, "print JSON (alias of -o json)")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "daemons' log lines on stderr: text or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "least level logged: debug, info, warn or error")
	root.PersistentFlags().DurationVar(&g.timeout, "timeout", defaultTimeout,
		"how long a command waits for etcd, the controller or the agent (0: forever; daemons and map are not limited)")
	root.SetFlagErrorFunc(flagError)
	for _, newCmd := range verbGroups() {
		root.AddCommand(newCmd(g))
	}
	markArgErrors(root)
	return root
}

// markArgErrors makes argument-validation failures of c and its
// subcommands usage errors (exit status 2) that name the command and show
// its usage line, and has every command group suggest the subcommand
// meant by a misspelt one.
func markArgErrors(c *cobra.Command) {
	if c.HasSubCommands() {
		c.SuggestionsMinimumDistance = suggestionDistance
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{fmt.Errorf("%s: %w; usage: %s", strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), err, cmd.UseLine())}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markArgErrors(sub)
	}
}

// startupSelfTest runs the codec self-test before any command that does not
// opt out: a node whose erasure code is wrong must not touch data.
func startupSelfTest(cmd *cobra.Command, _ []string) error {
	if cmd.Annotations[annotationNoSelfTest] != "" {
		return nil
	}
	if err := ec.SelfTest(); err != nil {
		return fmt.Errorf("refusing to start: erasure-code self-test failed: %w", err)
	}
	return nil
}

// groupCmd returns a command that only groups subcommands: without
// arguments it prints its help, with an unknown one it fails with a usage
// error (cobra alone would print help and succeed).
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: cobra.ArbitraryArgs, RunE: rejectUnknown}
	c.AddCommand(subs...)
	return c
}

// rejectUnknown is the RunE of grouping commands.
func rejectUnknown(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	return unknownCommand(cmd, args[0])
}

// suggestionDistance is how many edits apart a misspelt subcommand may be
// from the one suggested (cobra's Levenshtein distance; a prefix of a
// subcommand's name is suggested too).
const suggestionDistance = 2

// unknownCommand is the usage error for name given to the group cmd,
// suggesting the subcommands it may have meant.
func unknownCommand(cmd *cobra.Command, name string) error {
	hint := ""
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		hint = "; did you mean " + quoteAll(s, " or ") + "?"
	}
	return usageError{fmt.Errorf("unknown command %q for %q%s (see '%s --help')", name, cmd.CommandPath(), hint, cmd.CommandPath())}
}

// quoteAll quotes each of names and joins them with sep.
func quoteAll(names []string, sep string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, sep)
}

// flagError is every command's flag-parsing error. For a command group
// whose first argument is not one of its subcommands, the unknown command
// is the mistake to report: in "volume crate v --size 1GiB" cobra stops at
// "volume" (it knows no "crate") and parses the rest as volume's flags, so
// it would otherwise complain about --size, a flag create does have.
// pflag has collected the arguments before the bad flag when it fails.
func flagError(cmd *cobra.Command, err error) error {
	if args := cmd.Flags().Args(); cmd.HasSubCommands() && len(args) > 0 {
		return unknownCommand(cmd, args[0])
	}
	return usageError{err}
}

// usageError marks a command-line mistake (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// Exit statuses of a --wait that ended before its operation finished.
const (
	ExitTimedOut = 3
	ExitBlocked  = 4
)

// ExitCode maps Run's error to a process exit status: 0 success, 2 usage
// error (the command line's, or a library flag group's: config.IsUsage),
// 3 a --wait that timed out, 4 a --wait the controller reports blocked,
// 130 interrupted (context cancelled by a signal), 1 anything else.
func ExitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue) || config.IsUsage(err):
		return 2
	case errors.Is(err, admin.ErrWaitTimedOut):
		return ExitTimedOut
	case errors.Is(err, admin.ErrWaitBlocked):
		return ExitBlocked
	case errors.Is(err, context.Canceled):
		return 130
	default:
		return 1
	}
}
