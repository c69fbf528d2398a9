package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/placement"
	"github.com/nvstripe/nvstripe/volclient"
)

func newNamespaceCmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	ls, set, rm := newNSLsCmd(g, a), newNSSetStateCmd(g, a), newNSRmCmd(g, a)
	c := groupCmd("ns", "NVMe-oF namespaces: add, discover, list, change state, remove, wipe a label",
		newNSAddCmd(g, a), newNSDiscoverCmd(g, a), ls, set, rm, newNSWipeLabelCmd(g, a))
	addEtcdFlags(g, c, a)
	metadataOnly(ls, set, rm) // add, discover and wipe-label write labels: they keep the self-test
	return c
}

func newNSAddCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var f volclient.NamespaceFlags
	var hostNQN string
	var spec meta.NamespaceSpec
	var nso volclient.NamespaceOptions
	c := &cobra.Command{
		Use:   "add --host H --nqn NQN --nsid N --path tcp://ADDR:PORT [--path ...] [--size S]",
		Short: "Add a namespace: connect, check or write its label, record it in etcd",
		Long: "add connects to the namespace over its paths, reads its size, checks the nvstripe label in its\n" +
			"first 4KiB (a blank namespace gets one; another cluster's label or foreign data is refused)\n" +
			"and records it in state in. The host, the id, the NQN/NSID (not recorded yet), the paths and the\n" +
			"size are all checked before the label is written: a refused add leaves nothing behind.\n" +
			"A recorded NQN/NSID whose disk is blank (a replaced disk) is refused: the blank disk holds none of\n" +
			"the old namespace's data; the error names the steps (admin fail, wait for the rebuild, ns rm,\n" +
			"then ns add). A label left by mistake is cleared with 'ns wipe-label'.\n" +
			"With --size it records the namespace without connecting or labelling (metadata only): a volume\n" +
			"treats a namespace without its label as missing and marks it failed.",
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) (err error) {
			if spec, err = f.Spec(); err != nil {
				return err
			}
			if f.Size == 0 { // connects
				nso, err = connectOptions(&f.DHCHAP, hostNQN)
			}
			return err
		},
		RunE: withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			rec, err := volclient.AddNamespaceAs(cmd.Context(), s, spec, nso)
			if err != nil {
				return err
			}
			return printAdded(cmd, rec)
		}),
	}
	f.AddFlags(c.Flags())
	c.Flags().StringVar(&hostNQN, "host-nqn", "", hostNQNUsage)
	_ = c.RegisterFlagCompletionFunc("host", completeFlag(g, a, hostNames))
	return c
}

// connectOptions are the options of a command that connects to targets
// as this node: its host NQN (--host-nqn, or the node's identity), the
// DH-HMAC-CHAP secrets and the TLS key from their files.
func connectOptions(d *volclient.DHCHAPFiles, hostNQN string) (volclient.NamespaceOptions, error) {
	var o volclient.NamespaceOptions
	var err error
	if o.HostNQN, err = nodeHostNQN(hostNQN); err != nil {
		return o, err
	}
	if o.DHCHAPSecret, o.DHCHAPCtrlSecret, err = d.Load(); err != nil {
		return o, err
	}
	o.TLSKey, err = d.TLSKey()
	return o, err
}

// printAdded says a namespace was added, with its fencing warning.
func printAdded(cmd *cobra.Command, rec *meta.NamespaceRecord) error {
	warnf(cmd, rec.FenceWarning())
	return report(cmd, rec, "namespace %s added: host %s, %s nsid %d, %s", rec.ID, rec.Host, rec.NQN, rec.NSID, units.FormatSize(rec.Size))
}

func newNSWipeLabelCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var f volclient.NamespaceFlags
	var hostNQN string
	var force bool
	var spec meta.NamespaceSpec
	var nso volclient.NamespaceOptions
	c := &cobra.Command{
		Use:   "wipe-label --nqn NQN --nsid N --path tcp://ADDR:PORT [--path ...] [--force]",
		Short: "Clear an nvstripe label written by mistake, so that 'ns add' can label the namespace",
		Long: "wipe-label connects to the namespace and zeroes its label (the first 4KiB), printing what it\n" +
			"wiped. It refuses a namespace recorded in etcd with that NQN/NSID, and this cluster's label of a\n" +
			"namespace id that is recorded (in service: drain or fail it and 'ns rm' it first); another\n" +
			"cluster's label only with --force; a blank block, and data that is no nvstripe label, never.",
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if f.NQN == "" || f.NSID == 0 || len(f.Paths) == 0 {
				return usageError{errors.New("ns wipe-label needs --nqn, --nsid and at least one --path")}
			}
			paths, err := meta.PathRecords(f.Paths)
			if err != nil {
				return usageError{err}
			}
			spec = meta.NamespaceSpec{NQN: f.NQN, NSID: f.NSID, Paths: paths}
			nso, err = connectOptions(&f.DHCHAP, hostNQN)
			return err
		},
		RunE: withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			w, err := volclient.WipeLabel(cmd.Context(), s, spec, nso, force)
			if err != nil {
				return err
			}
			what := fmt.Sprintf("the label of namespace %s of cluster %s (slot size %s)", w.Namespace, w.ClusterID, units.FormatSize(w.SlotSize))
			if w.Corrupt {
				what = "a corrupt label"
			}
			return report(cmd, w, "%s nsid %d: wiped %s", w.NQN, w.NSID, what)
		}),
	}
	fl := c.Flags()
	fl.StringVar(&f.NQN, "nqn", "", "subsystem NQN (required)")
	fl.Uint32Var(&f.NSID, "nsid", 0, "namespace ID in the subsystem (required)")
	fl.StringArrayVar(&f.Paths, "path", nil, "path tcp://ADDR:PORT, repeatable (required)")
	fl.BoolVar(&force, "force", false, "also wipe another cluster's label (this etcd cannot tell whether that cluster uses it)")
	fl.StringVar(&hostNQN, "host-nqn", "", hostNQNUsage)
	f.DHCHAP.AddFlags(fl)
	return c
}

func newNSDiscoverCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var host, hostNQN string
	var maxNSID uint32
	var allowUnfenced bool
	var secrets volclient.DHCHAPFiles
	var nso volclient.NamespaceOptions
	c := &cobra.Command{
		Use:   "discover tcp://ADDR:PORT --host H",
		Short: "Add every namespace a discovery controller lists",
		Long: "discover reads the discovery log page at ADDR:PORT, and for every NVMe subsystem in it adds\n" +
			"namespaces 1, 2, ... (until one does not answer, at most --max-nsid) with all the subsystem's\n" +
			"TCP paths, as 'ns add' does (connect, label, record). Namespaces already recorded are skipped.\n" +
			"Ids are HOST-nNSID; where another subsystem of the host took that one, HOST-TAIL-nNSID (TAIL:\n" +
			"the last ':' field of the NQN). A target that requires TLS (target serve --tls=require) needs\n" +
			"--tls-key-file for the discovery and the namespaces; one that requires DH-HMAC-CHAP needs\n" +
			"--dhchap-secret-file for the namespaces.",
		Args: cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) (err error) {
			if host == "" {
				return usageError{errors.New("ns discover needs --host")}
			}
			if err := meta.CheckPathAddr(args[0]); err != nil {
				return usageError{err}
			}
			nso, err = connectOptions(&secrets, hostNQN)
			return err
		},
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			return discover(cmd, s, args[0], host, nso, maxNSID, allowUnfenced)
		}),
	}
	c.Flags().StringVar(&host, "host", "", "host the discovered namespaces live on (required)")
	_ = c.RegisterFlagCompletionFunc("host", completeFlag(g, a, hostNames))
	c.Flags().StringVar(&hostNQN, "host-nqn", "", hostNQNUsage)
	c.Flags().Uint32Var(&maxNSID, "max-nsid", 64, "highest namespace ID to probe per subsystem")
	c.Flags().BoolVar(&allowUnfenced, "allow-unfenced", false, volclient.AllowUnfencedHelp)
	secrets.AddFlags(c.Flags())
	return c
}

func discover(cmd *cobra.Command, s *meta.Store, addr, host string, nso volclient.NamespaceOptions, maxNSID uint32, allowUnfenced bool) error {
	each := func(d volclient.Discovered) {
		if d.Added != nil {
			printAdded(cmd, d.Added)
		} else {
			fmt.Fprintf(cmd.OutOrStdout(), "%s nsid %d: already recorded as %s\n", d.NQN, d.NSID, d.Known)
		}
	}
	if wantJSON(cmd) {
		each = nil
	}
	rep, err := volclient.DiscoverAll(cmd.Context(), s, addr, host, nso, maxNSID, allowUnfenced, each)
	if err != nil {
		return err
	}
	return report(cmd, rep, "%d namespaces added from %d subsystems at %s", len(rep.Added), rep.Subsystems, addr)
}

func newNSLsCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	return readCmd(g, a, "ls", "List namespaces with state, size and slot use", (*meta.Store).NamespaceUses, meta.WriteNamespaceUses)
}

func newNSSetStateCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var st placement.State
	return &cobra.Command{
		Use:               "set-state NS in|draining|down|out|failed|drained",
		Short:             "Change a namespace's state (only 'in' receives new segments)",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeNSState(g, a),
		PreRunE: func(_ *cobra.Command, args []string) (err error) {
			if st, err = placement.ParseState(args[1]); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			if err := s.SetNamespaceState(cmd.Context(), args[0], st); err != nil {
				return err
			}
			return report(cmd, map[string]string{"namespace": args[0], "state": st.String()}, "namespace %s is now %s", args[0], st)
		}),
	}
}
