package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// TestAdminScrub: a scrub of an unmapped volume is refused with a reason;
// one of a mapped volume records a task for its read-write owner, and
// --wait reports what the owner wrote back when it ended, and so does
// admin status (the blocks left bad too).
func TestAdminScrub(t *testing.T) {
	a, s := adminFixture(t)
	ctx := context.Background()
	a.fails("not mapped read-write", "admin", "scrub", "v")
	a.ok("volume v: skipped", "admin", "scrub")
	owner, err := s.Acquire(ctx, "v", meta.OwnerOptions{Holder: "node-1", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Release(ctx)
	a.ok("volume v: scrub running in node-1 (task scrub-v)", "admin", "scrub", "v")
	if tk, err := s.Task(ctx, meta.ScrubTaskID("v")); err != nil || tk.State != meta.TaskRunning || tk.Holder != "node-1" {
		t.Fatalf("scrub task %+v %v, want it running for node-1", tk, err)
	}
	// Nobody runs it: --wait ends at --timeout, exit 3, saying how far.
	_, err = a.run("admin", "scrub", "v", "--wait", "--timeout", "2s")
	if ExitCode(err) != ExitTimedOut || err == nil || !strings.HasPrefix(err.Error(), "not finished (timed out): scrub of volume v: 0 of ") {
		t.Errorf("scrub --wait that times out: %v (exit %d)", err, ExitCode(err))
	}
	// Play the owner: finish every scrub task the CLI starts.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			tk, err := s.Task(ctx, meta.ScrubTaskID("v"))
			if err == nil && tk.State == meta.TaskRunning {
				tk.State, tk.Done, tk.Total, tk.Found, tk.Healed, tk.Unhealed, tk.Parity, tk.Ended = meta.TaskDone, 4, 4, 3, 2, 1, 1, time.Now().UTC().Format(time.RFC3339)
				_ = s.PutTask(ctx, tk)
			}
		}
	}()
	a.ok("volume v: scrub done: 4 of 4 segments, 3 blocks bad, 2 healed, 1 left bad, 1 parity chunks rewritten", "admin", "scrub", "v", "--wait")
	a.ok("3 bad, 2 healed, 1 left bad, ended", "admin", "status")
	a.ok(`"unhealed": 1`, "admin", "status", "-o", "json")
}
