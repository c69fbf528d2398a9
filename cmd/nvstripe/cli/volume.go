package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/capacity"
	"github.com/nvstripe/nvstripe/config"
	"github.com/nvstripe/nvstripe/internal/jsonout"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
)

func newVolumeCmd(g *globals) *cobra.Command {
	a := &config.EtcdFlags{}
	c := groupCmd("volume", "Create, list, inspect, resize and remove volumes",
		newVolumeCreateCmd(g, a), newVolumeLsCmd(g, a), newVolumeInfoCmd(g, a), newVolumeResizeCmd(g, a), newVolumeSetCmd(g, a), newVolumeRmCmd(g, a))
	addEtcdFlags(g, c, a)
	metadataOnly(c.Commands()...)
	c.AddCommand(newVolumeSettleCmd(g, a)) // reads and writes the volume: keeps the self-test
	return c
}

func newVolumeCreateCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var f capacity.VolumeFlags
	var spec meta.VolumeSpec
	c := &cobra.Command{
		Use:   "create NAME --size S [--k 4 --m 2 --chunk 128KiB] [--checksum crc32c|none] [--write-log ppl|none] [--allow-shared-domains] [--qos-iops N] [--qos-bps SIZE/s] ...",
		Short: "Create a thin volume (space is placed on first write)",
		Long: "create records a volume of --size bytes (a multiple of 4KiB) striped as k data + m parity\n" +
			"chunks. Every segment puts its k+m shards in distinct failure domains, so k+m may not exceed\n" +
			"the domains in service unless --allow-shared-domains. With --checksum crc32c (the default) every\n" +
			"4KiB block of every shard has a checksum, verified on every read (about 0.1% of the space).\n" +
			"It warns when thin volumes would promise more than the usable space ('nvstripe df') and refuses\n" +
			"past the cluster's limit ('cluster set --max-overcommit', default 2).\n" +
			"With --write-log ppl (the default with checksums) every stripe write first logs partial parity,\n" +
			"so a crash mid-write plus a lost shard loses no acknowledged byte (about 0.4% of the space).\n" +
			"The --qos-* flags limit the volume's IO wherever it is mapped (see volume set).",
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, args []string) (err error) {
			if spec, err = f.Spec(args[0], cmd.Flags().Changed("write-log")); err != nil {
				return err
			}
			// The cluster's own layout check, before etcd is dialled: all
			// of it but what depends on the slot size (the cluster checks
			// that when it creates the volume).
			return config.Usage(spec.Layout.Check(0))
		},
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			rec, warn, err := capacity.CreateVolume(cmd.Context(), s, spec)
			if warnf(cmd, warn); err != nil {
				return err
			}
			return report(cmd, rec, "volume %s created: %s, %d+%d, chunk %s", rec.Name, units.FormatSize(rec.Size), f.K, f.M, units.FormatSize(f.Chunk))
		}),
	}
	f.AddFlags(c.Flags())
	return c
}

func newVolumeLsCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "ls",
		Short: "List volumes (and below them, those with unsettled blocks: see volume settle)",
		Args:  cobra.NoArgs,
		RunE: withStore(g, a, func(cmd *cobra.Command, _ []string, s *meta.Store) error {
			vols, err := s.Volumes(cmd.Context())
			if err != nil {
				return err
			}
			counts, err := s.UnsettledCounts(cmd.Context())
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return jsonout.Write(cmd.OutOrStdout(), listedVolumes(vols, counts))
			}
			if err := meta.WriteVolumes(cmd.OutOrStdout(), vols); err != nil {
				return err
			}
			return meta.WriteUnsettled(cmd.OutOrStdout(), counts)
		}),
	}
	return c
}

// listedVolume is a volume as `volume ls -o json` gives it: its record
// and its unsettled blocks, under the name `volume info` gives them.
type listedVolume struct {
	*meta.VolumeRecord
	Unsettled meta.UnsettledCount `json:"unsettled"`
}

func listedVolumes(vols []*meta.VolumeRecord, counts map[string]meta.UnsettledCount) []listedVolume {
	out := make([]listedVolume, len(vols))
	for i, v := range vols {
		out[i] = listedVolume{VolumeRecord: v, Unsettled: counts[v.Name]}
	}
	return out
}

func newVolumeInfoCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	c := &cobra.Command{
		Use:               "info NAME",
		Short:             "Show a volume: layout, allocation, dirty segments, owners",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, a, volumeNames),
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			info, err := s.VolumeInfo(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return writeOut(cmd, info, meta.WriteVolumeInfo)
		}),
	}
	return c
}

func newVolumeResizeCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var size int64
	c := &cobra.Command{
		Use:   "resize NAME --size S",
		Short: "Grow a volume (shrinking is refused; so is growing past the overcommit limit)",
		Long: "resize grows the volume's record. Where it is mapped, the map (agent or foreground) sees the\n" +
			"new size within seconds: a kernel nbd device gets its new capacity (resize2fs can then grow a\n" +
			"mounted ext4 online), NBD clients see it at their next handshake, a FUSE file at the next stat;\n" +
			"a ublk device keeps its size until it is mapped again (the driver cannot change it before Linux 6.16).",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, a, volumeNames),
		PreRunE: func(*cobra.Command, []string) error {
			if size == 0 {
				return usageError{errors.New("volume resize needs --size")}
			}
			return nil
		},
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			v, warn, err := capacity.ResizeVolume(cmd.Context(), s, args[0], size)
			if warnf(cmd, warn); err != nil {
				return err
			}
			return report(cmd, v, "volume %s is now %s", v.Name, units.FormatSize(v.Size))
		}),
	}
	c.Flags().Var(units.NewFlag(&size), "size", "new size (required)")
	return c
}

func newVolumeSetCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	var f capacity.QoSFlags
	var change meta.QoSChange
	c := &cobra.Command{
		Use:   "set NAME [--qos-iops N] [--qos-bps SIZE/s] [--qos-read-iops N] [--qos-write-iops N] [--qos-read-bps SIZE/s] [--qos-write-bps SIZE/s] [--qos-burst DURATION]",
		Short: "Change a volume's QoS limits (applied by its mappings within a second)",
		Long: "set changes the limits given and keeps the others; 0 removes a limit. Limits are token buckets\n" +
			"applied where the volume is mapped (agent, foreground map, FUSE), to requests (IOPS, whatever\n" +
			"their size) and bytes (BPS); a total and a per-direction limit both apply. Each bucket holds\n" +
			"--qos-burst of its limit (default 1s): after a pause the volume may go that far above it.\n" +
			"Mappings follow the volume's record and apply a change within a second; IO that waits for its\n" +
			"turn shows as QoS wait in the metrics and in `nvstripe top`. Rebuild, drain, rebalance and scrub\n" +
			"traffic is not counted: the controller's pacer governs it.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, a, volumeNames),
		PreRunE: func(*cobra.Command, []string) (err error) {
			if change, err = f.Change(); err != nil {
				return err
			}
			if !f.Given() {
				return usageError{errors.New("volume set needs at least one --qos-* flag")}
			}
			return nil
		},
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			v, err := s.SetVolumeQoS(cmd.Context(), args[0], change)
			if err != nil {
				return err
			}
			return report(cmd, v, "volume %s qos: %s", v.Name, v.QoS)
		}),
	}
	f.AddFlags(c.Flags())
	return c
}

func newVolumeRmCmd(g *globals, a *config.EtcdFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a volume and free its space (refused while it is mapped)",
		Long: "rm marks the volume deleting (it can no longer be mapped), frees its slots and removes its\n" +
			"records. One that stopped half way (etcd went away, --timeout passed) leaves the volume\n" +
			"deleting; running rm again finishes it.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, a, volumeNames),
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			return removeVolume(cmd, s, args[0])
		}),
	}
}

// warnf prints a library's warning, if any, on stderr.
func warnf(cmd *cobra.Command, warn string) {
	if warn != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+warn)
	}
}

// removeVolume is `volume rm`: it says when it finishes an earlier rm, and
// when it stops half way that running it again will finish.
func removeVolume(cmd *cobra.Command, s *meta.Store, name string) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	if v, err := s.Volume(ctx, name); err == nil && v.State == meta.VolumeDeleting && !wantJSON(cmd) {
		fmt.Fprintf(out, "volume %s is deleting (an earlier rm stopped half way): finishing it\n", name)
	}
	if err := s.DeleteVolume(ctx, name); err != nil {
		if ctx.Err() != nil || errors.Is(err, meta.ErrUnreachable) {
			err = fmt.Errorf("%w (volume %s may be left deleting: run `nvstripe volume rm %s` again to finish)", err, name, name)
		}
		return err
	}
	return report(cmd, map[string]any{"volume": name, "removed": true}, "volume %s removed", name)
}
