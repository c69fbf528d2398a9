package admin

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/internal/table"
	"github.com/nvstripe/nvstripe/internal/units"
	"github.com/nvstripe/nvstripe/meta"
)

// WriteStatus prints st for people: the leader, a table of volumes, one
// of namespaces (sizes in binary units), blocked shards and the tasks with
// progress bars.
func WriteStatus(w io.Writer, st *StatusReply) error {
	leader := st.Leader
	if leader == "" {
		leader = "none (no controller running)"
	}
	fmt.Fprintf(w, "controller leader: %s\n\n", leader)
	tw := table.New(w)
	fmt.Fprintln(tw, "VOLUME\tLAYOUT\tSEGMENTS\tHEALTH\tSTALE\tMOVING\tOWNER")
	for _, v := range st.Volumes {
		fmt.Fprintf(tw, "%s\t%d+%d\t%d\t%s\t%d\t%d\t%s\n", v.Volume, v.K, v.M, v.Segments, v.Health, v.Stale, v.Moving, dash(v.Owner))
	}
	fmt.Fprintln(tw, "\nNAMESPACE\tHOST\tSTATE\tFENCING\tUSED\tCAPACITY\t")
	for _, n := range st.Namespaces {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", n.Id, n.Host, n.State, dash(n.Fencing), units.FormatSize(n.Used), units.FormatSize(n.Capacity))
	}
	tw.Flush()
	for _, n := range st.Namespaces {
		if n.Back != "" {
			fmt.Fprintf(w, "%s %s\n", n.Id, n.Back)
		}
	}
	for _, v := range st.Volumes {
		if line := (meta.UnsettledCount{Blocks: int(v.Unsettled), More: v.UnsettledMore}).Advice(v.Volume); line != "" {
			fmt.Fprintf(w, "volume %s: %s\n", v.Volume, line)
		}
	}
	if len(st.Blocked) > 0 {
		fmt.Fprintf(w, "\nblocked (no home for a shard):\n  %s\n", strings.Join(st.Blocked, "\n  "))
	}
	if len(st.Tasks) == 0 {
		_, err := fmt.Fprintln(w, "\nno tasks")
		return err
	}
	tw = table.New(w)
	fmt.Fprintln(tw, "\nTASK\tKIND\tSEGMENT\tMOVE\tHOLDER\tSTATE\tPROGRESS\tETA")
	for _, t := range st.Tasks {
		move := "-"
		if t.Segment != "" {
			move = fmt.Sprintf("shard %d %s -> %s", t.Shard, t.From, t.To)
		}
		if t.Kind == meta.TaskScrub {
			move = fmt.Sprintf("%d bad, %d healed, %d left bad", t.Found, t.Healed, t.Unhealed)
			if t.Ended != "" {
				move += ", ended " + t.Ended
			}
		}
		eta := "-"
		if t.EtaSeconds > 0 || t.Done > 0 {
			eta = (time.Duration(t.EtaSeconds) * time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Id, t.Kind, dash(t.Segment), move, dash(t.Holder), t.State, progressBar(t.Done, t.Total), eta)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// progressBar draws done of total as [#####-----] NN%.
func progressBar(done, total int64) string {
	const width = 20
	if total <= 0 {
		return "[" + strings.Repeat("-", width) + "]   0%"
	}
	done = min(max(done, 0), total)
	n := int(done * width / total)
	return fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat("-", width-n), done*100/total)
}

// DrainText is what draining name (a host or a namespace) did, for
// people: one line per namespace now draining.
func DrainText(name string, rep *DrainReply) string {
	if len(rep.Namespaces) == 0 {
		return "host " + name + " has no namespace in service or draining: nothing to drain"
	}
	return "namespace " + strings.Join(rep.Namespaces, ": draining\nnamespace ") + ": draining"
}

// RebalanceText is a rebalance plan (rep, for req) for people: the spread
// before and after, the moves, and what became of the task.
func RebalanceText(req *RebalanceRequest, rep *RebalanceReply) string {
	var b strings.Builder
	fmt.Fprintf(&b, "spread before %.1f%%, after %.1f%% (threshold %.1f%%): %d moves, %s of shard data",
		rep.SpreadBefore*100, rep.SpreadAfter*100, req.Threshold*100, len(rep.Moves), units.FormatSize(rep.Bytes))
	if len(rep.Moves) > 0 {
		tw := table.New(&b)
		fmt.Fprint(tw, "\nSEGMENT\tSHARD\tFROM\tTO")
		for _, m := range rep.Moves {
			fmt.Fprintf(tw, "\n%s/%d\t%d\t%s\t%s", m.Volume, m.Segment, m.Shard, m.From, m.To)
		}
		tw.Flush()
	}
	switch {
	case rep.Task != "":
		fmt.Fprintf(&b, "\ntask %s recorded: the leading controller carries it out (nvstripe admin status)", rep.Task)
	case req.Apply:
		b.WriteString("\nnothing to do: no task recorded")
	}
	return b.String()
}
