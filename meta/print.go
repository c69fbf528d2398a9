package meta

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/nvstripe/nvstripe/internal/table"
	"github.com/nvstripe/nvstripe/internal/units"
)

// This file renders records for people, as the list and info commands
// print them (sizes in binary units, units.FormatSize); their JSON is the
// records themselves.

// WriteNamespaceUses prints `nvstripe ns ls`: one row per namespace, its
// paths with their ANA states.
func WriteNamespaceUses(w io.Writer, views []NamespaceUse) error {
	tw := table.New(w)
	fmt.Fprintln(tw, "ID\tHOST\tSTATE\tFENCING\tSIZE\tUSED\tNQN\tNSID\tPATHS")
	for _, v := range views {
		var ps []string
		for _, p := range v.Paths {
			ps = append(ps, fmt.Sprintf("%s(%s)", strings.TrimPrefix(p.Addr, "tcp://"), p.ANAState))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", v.ID, v.Host, v.State, v.Fencing(), units.FormatSize(v.Size),
			units.FormatSize(v.UsedBytes), v.NQN, v.NSID, strings.Join(ps, ","))
	}
	return tw.Flush()
}

// WriteVolumes prints `nvstripe volume ls`: one row per volume.
func WriteVolumes(w io.Writer, vols []*VolumeRecord) error {
	tw := table.New(w)
	fmt.Fprintln(tw, "NAME\tSIZE\tLAYOUT\tCHUNK\tSTATE\tQOS")
	for _, v := range vols {
		fmt.Fprintf(tw, "%s\t%s\t%d+%d\t%s\t%s\t%s\n", v.Name, units.FormatSize(v.Size), v.Layout.K, v.Layout.M,
			units.FormatSize(v.Layout.Chunk), v.State, v.QoS)
	}
	return tw.Flush()
}

// WriteVolumeInfo prints `nvstripe volume info`: the layout, the
// allocation, the unsettled blocks and the owners.
func WriteVolumeInfo(w io.Writer, info *VolumeInfo) error {
	fmt.Fprintf(w, "volume %s\nsize %s\nlayout %d+%d chunk %s\nchecksums %s\nstate %s\nqos %s\nsegments %d allocated of %d (%d dirty, %d moving)\n",
		info.Name, units.FormatSize(info.Size), info.Layout.K, info.Layout.M, units.FormatSize(info.Layout.Chunk), info.Layout.Format(),
		info.State, info.QoS, info.Allocated, info.Segments, info.Dirty, info.Moving)
	if line := info.Unsettled.Advice(info.Name); line != "" {
		fmt.Fprintln(w, line)
	}
	for _, o := range info.Owners {
		fmt.Fprintf(w, "owner %s (%s, epoch %d)\n", o.Holder, o.Mode, o.Epoch)
	}
	if len(info.Owners) == 0 {
		_, err := fmt.Fprintln(w, "not mapped")
		return err
	}
	return nil
}

// WriteHosts prints `nvstripe host ls`: one row per host, its labels
// sorted by key.
func WriteHosts(w io.Writer, hosts []*HostRecord) error {
	tw := table.New(w)
	fmt.Fprintln(tw, "NAME\tLABELS")
	for _, h := range hosts {
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(h.Labels)) {
			ls = append(ls, k+"="+h.Labels[k])
		}
		fmt.Fprintf(tw, "%s\t%s\n", h.Name, strings.Join(ls, ","))
	}
	return tw.Flush()
}

// WriteCluster prints `nvstripe cluster info`.
func WriteCluster(w io.Writer, rec *ClusterRecord) error {
	domain := rec.DomainLabel
	if domain == "" {
		domain = "host"
	}
	_, err := fmt.Fprintf(w, "cluster %s\nid %s\nslot size %s\nfailure domain %s\nmax overcommit %g\nschema %d\n",
		rec.Name, rec.ID, units.FormatSize(rec.SlotSize), domain, rec.OvercommitLimit(), rec.Schema)
	return err
}
