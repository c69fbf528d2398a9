package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/storetest"
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

// TestAdminScrubWaitOwnerRestart: `admin scrub --wait` whose volume's
// owner stops mapping it (an agent restarting) prints that it waits for
// the owner, follows the scrub once the owner maps the volume again and
// exits 0 when it is done; with an owner that does not come back within
// --owner-grace it exits 4 (blocked), saying where the scrub stopped and
// what to do.
func TestAdminScrubWaitOwnerRestart(t *testing.T) {
	a, s := adminFixture(t)
	ctx := context.Background()
	acquire := func(holder string) *meta.Owner {
		o, err := s.Acquire(ctx, "v", meta.OwnerOptions{Holder: holder, TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Release(ctx) })
		return o
	}
	// progress writes the running scrub's progress as its owner would.
	progress := func(done, total int64) { storetest.PlayScrub(t, s, "v", done, total) }
	owner := acquire("node-1")
	var out testutil.Buffer
	ended := make(chan error, 1)
	go func() {
		ended <- Run(ctx, []string{"admin", "scrub", "v", "--wait", "--owner-grace", "1h", "--timeout", "0",
			"--etcd", a.etcd, "--cluster", a.cluster}, &out, io.Discard)
	}()
	printed := func(what string) {
		t.Helper()
		testutil.WaitFor(t, "scrub --wait to print "+what, func() bool { return strings.Contains(out.String(), what) || len(ended) > 0 })
		if !strings.Contains(out.String(), what) {
			t.Fatalf("scrub --wait ended (%v) before printing %q:\n%s", <-ended, what, out.String())
		}
	}
	printed("volume v: scrub running in node-1 (task scrub-v)")
	progress(2, 4)
	owner.Release(ctx) // the agent stops
	printed("volume v: node-1, which runs its scrub, does not map it now (nobody maps it read-write): waiting up to 1h0m0s for it to map it again (restarting?)")
	owner = acquire("node-1") // and starts again
	printed("volume v: node-1 maps it again: its scrub goes on from segment 2 of 4")
	progress(4, 4)
	if err := <-ended; err != nil || !strings.Contains(out.String(), "volume v: scrub done: 4 of 4 segments") {
		t.Fatalf("scrub --wait over an owner restart: %v\n%s", err, out.String())
	}

	// The owner stops and does not come back.
	go func() {
		_, err := a.run("admin", "scrub", "v", "--wait", "--owner-grace", "1ms", "--timeout", "0")
		ended <- err
	}()
	testutil.WaitFor(t, "the second scrub to start", func() bool {
		tk, err := s.Task(ctx, meta.ScrubTaskID("v"))
		return err == nil && tk.State == meta.TaskRunning
	})
	owner.Release(ctx)
	err := <-ended
	want := "not finished (blocked): scrub of volume v: 0 of 0 segments; volume v: node-1, which runs its scrub, did not map it again within 1ms " +
		"(nobody maps it read-write): the scrub resumes at segment 0 of 0 when node-1 maps it again; map it there, or run `nvstripe admin scrub v` once it is mapped elsewhere"
	if ExitCode(err) != ExitBlocked || err == nil || err.Error() != want {
		t.Fatalf("scrub --wait without its owner: %v (exit %d), want exit %d: %s", err, ExitCode(err), ExitBlocked, want)
	}
}
