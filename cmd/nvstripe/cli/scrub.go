package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/jsonout"
	"github.com/nvstripe/nvstripe/meta"
)

func newAdminScrubCmd(g *globals, a *etcdAuth) *cobra.Command {
	var wait bool
	c := &cobra.Command{
		Use:   "scrub [VOLUME] [--wait]",
		Short: "Check every block of a volume (all mapped volumes) against its checksums and parity, healing what can be healed",
		Long: "scrub asks the read-write owner of the volume (every volume mapped read-write when none is named)\n" +
			"to read every stripe, verify its checksums and parity, and rewrite bad blocks from the other shards.\n" +
			"It is paced like the controller's moves, resumes where it stopped when the owner restarts, and\n" +
			"shows in `admin status` as a task. It works on etcd directly (not through --controller).",
		Args: cobra.MaximumNArgs(1),
		RunE: withStore(g, a, func(cmd *cobra.Command, args []string, s *meta.Store) error {
			names := args
			if len(names) == 0 {
				vols, err := s.Volumes(cmd.Context())
				if err != nil {
					return err
				}
				for _, v := range vols {
					names = append(names, v.Name)
				}
			}
			res, err := scrubVolumes(cmd.Context(), textOut(cmd), s, names, len(args) == 1, wait)
			if wantJSON(cmd) {
				return errors.Join(err, jsonout.Write(cmd.OutOrStdout(), res))
			}
			return err
		}),
	}
	c.Flags().BoolVar(&wait, "wait", false, "wait for the scrubs to finish and print what they found")
	return c
}

// scrubResult is what `admin scrub` reports for one volume.
type scrubResult struct {
	Volume  string `json:"volume"`
	Skipped string `json:"skipped,omitempty"` // why no scrub started
	Task    string `json:"task,omitempty"`
	Holder  string `json:"holder,omitempty"`
	State   string `json:"state,omitempty"` // with --wait: how it ended
	Done    int64  `json:"done_segments"`
	Total   int64  `json:"total_segments"`
	Found   int64  `json:"blocks_bad"`
	Healed  int64  `json:"blocks_healed"`
	Error   string `json:"error,omitempty"`
}

// scrubVolumes starts the scrub of each volume (skipping unmapped ones
// unless named) and, with wait, reports each when it ends; w gets the
// text lines (io.Discard under -o json).
func scrubVolumes(ctx context.Context, w io.Writer, s *meta.Store, names []string, named, wait bool) ([]scrubResult, error) {
	res := []scrubResult{}
	var started []*meta.TaskRecord
	for _, name := range names {
		t, err := s.StartScrub(ctx, name)
		if err != nil && named {
			return res, err
		}
		if err != nil {
			fmt.Fprintf(w, "volume %s: skipped: %v\n", name, err)
			res = append(res, scrubResult{Volume: name, Skipped: err.Error()})
			continue
		}
		fmt.Fprintf(w, "volume %s: scrub running in %s (task %s)\n", name, t.Holder, t.ID)
		res = append(res, scrubResult{Volume: name, Task: t.ID, Holder: t.Holder, State: t.State, Total: t.Total})
		started = append(started, t)
	}
	if !wait {
		return res, nil
	}
	var failed error
	for _, t := range started {
		end, err := waitTask(ctx, s, t.ID)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(w, "volume %s: scrub %s: %d of %d segments, %d blocks bad, %d healed%s\n",
			end.Volume, end.State, end.Done, end.Total, end.Found, end.Healed, errSuffix(end.Error))
		for i := range res {
			if res[i].Task == end.ID {
				res[i].State, res[i].Done, res[i].Total, res[i].Found, res[i].Healed, res[i].Error = end.State, end.Done, end.Total, end.Found, end.Healed, end.Error
			}
		}
		if end.State != meta.TaskDone && failed == nil {
			failed = fmt.Errorf("scrub of volume %s %s: %s", end.Volume, end.State, end.Error)
		}
	}
	return res, failed
}

// waitTask polls task id until it is no longer running, or its holder no
// longer owns the volume (the scrub then waits for the holder to map it
// again).
func waitTask(ctx context.Context, s *meta.Store, id string) (*meta.TaskRecord, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		t, err := s.Task(ctx, id)
		if err != nil || t.State != meta.TaskRunning {
			return t, err
		}
		if owned, err := ownsRW(ctx, s, t.Volume, t.Holder); err != nil || !owned {
			return nil, cmp.Or(err, fmt.Errorf("volume %s: %s no longer maps it; the scrub resumes at segment %d of %d when it maps it again", t.Volume, t.Holder, t.Done, t.Total))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func ownsRW(ctx context.Context, s *meta.Store, volume, holder string) (bool, error) {
	owners, err := s.Owners(ctx, volume)
	for _, o := range owners {
		if o.Mode == meta.ModeRW && o.Holder == holder {
			return true, err
		}
	}
	return false, err
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + e
}
