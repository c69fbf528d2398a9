package cli

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/agent"
	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/meta"
)

// Shell completion (cobra's `completion` command writes the scripts; the
// shell calls the hidden `__complete`) of the names commands take: volumes,
// hosts, namespaces and clusters, read from etcd, and the devices and
// volumes mapped on this node for unmap. A shell waits for it on every TAB,
// so a completion gives up after completionTimeout and prints nothing
// when etcd does not answer (no error: the shell would show it as a
// candidate).

// completionTimeout bounds one completion's reads of etcd or the agent.
const completionTimeout = 2 * time.Second

// lister reads the names a completion offers.
type lister func(ctx context.Context, s *meta.Store) ([]string, error)

func volumeNames(ctx context.Context, s *meta.Store) ([]string, error) {
	vols, err := s.Volumes(ctx)
	return namesOf(vols, func(v *meta.VolumeRecord) string { return v.Name }), err
}

func hostNames(ctx context.Context, s *meta.Store) ([]string, error) {
	hosts, err := s.Hosts(ctx)
	return namesOf(hosts, func(h *meta.HostRecord) string { return h.Name }), err
}

func namespaceIDs(ctx context.Context, s *meta.Store) ([]string, error) {
	nss, err := s.Namespaces(ctx)
	return namesOf(nss, func(n *meta.NamespaceRecord) string { return n.ID }), err
}

// hostsAndNamespaces are what `admin drain` takes.
func hostsAndNamespaces(ctx context.Context, s *meta.Store) ([]string, error) {
	hosts, err := hostNames(ctx, s)
	if err != nil {
		return nil, err
	}
	nss, err := namespaceIDs(ctx, s)
	return append(hosts, nss...), err
}

func clusterNames(ctx context.Context, s *meta.Store) ([]string, error) { return s.ClusterNames(ctx) }

func namesOf[T any](recs []T, name func(T) string) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, name(r))
	}
	return out
}

// completeArgs completes the first positional argument of a command with
// the names list reads (nothing after the first).
func completeArgs(g *globals, a *config.EtcdFlags, list lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return storeNames(cmd, g, a, list, toComplete)
	}
}

// completeFlag completes a flag's value with the names list reads.
func completeFlag(g *globals, a *config.EtcdFlags, list lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return storeNames(cmd, g, a, list, toComplete)
	}
}

// storeNames reads the names from etcd, as cmd's flags, the environment and
// the config file say to reach it, within completionTimeout; those that
// start with prefix. Any failure offers nothing.
func storeNames(cmd *cobra.Command, g *globals, a *config.EtcdFlags, list lister, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	ctx, cancel := context.WithTimeout(contextOf(cmd), completionTimeout)
	defer cancel()
	// The root's PersistentPreRunE ran for __complete, not for cmd.
	g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if applyConfig(cmd, g) != nil {
		return nil, none
	}
	if a.Timeout <= 0 || a.Timeout > completionTimeout {
		a.Timeout = completionTimeout
	}
	s, err := openStore(ctx, g, a)
	if err != nil {
		return nil, none
	}
	defer s.Close()
	names, err := list(ctx, s)
	if err != nil {
		return nil, none
	}
	return withPrefix(names, prefix), none
}

// completeMapped completes unmap's argument: the volumes and devices
// mapped on this node (what `nvstripe ls` lists).
func completeMapped(sock, dir *string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(contextOf(cmd), completionTimeout)
		defer cancel()
		var names []string
		for _, r := range agent.ListMappings(ctx, *sock, *dir, false, func(string) {}) {
			names = append(names, r.Volume)
			if r.Device != "" {
				names = append(names, r.Device)
			}
		}
		return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeWords completes the argument at position i (after i others) with
// fixed words: the states of `ns set-state`.
func completeWords(i int, words ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) != i {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return withPrefix(words, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNSState completes `ns set-state NS STATE`.
func completeNSState(g *globals, a *config.EtcdFlags) cobra.CompletionFunc {
	ns := completeArgs(g, a, namespaceIDs)
	states := completeWords(1, "in", "draining", "down", "out", "failed", "drained")
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return ns(cmd, args, toComplete)
		}
		return states(cmd, args, toComplete)
	}
}

func withPrefix(names []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// addEtcdFlags defines a's flags on c and its subcommands (persistent),
// with --cluster completed by the clusters at the etcd endpoints.
func addEtcdFlags(g *globals, c *cobra.Command, a *config.EtcdFlags) {
	a.AddFlags(c.PersistentFlags())
	_ = c.RegisterFlagCompletionFunc("cluster", completeFlag(g, a, clusterNames))
}
