package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/storetest"
)

// TestScrubWaitAgentRestartProcess: `admin scrub v --wait` across a restart
// of the agent process that owns v. A stopped agent leaves its scrub
// running at the segment reached and v unowned; restarted, it maps v again
// and resumes the scrub. The wait, whether it found v unowned when it
// started (it waits for an owner, then starts the scrub) or saw the owner
// go while it followed the scrub (it waits for the owner to come back),
// ends with the scrub done, exit 0, not blocked. (The owner before the
// second restart is played in-process under the agent's holder name: a
// real agent would run the scrub to its end before the test could stop
// it.)
func TestScrubWaitAgentRestartProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the nvstripe binary")
	}
	bin := buildGossipBinary(t)
	cl := startMapCluster(t)
	s := storetest.Open(t, meta.Config{Endpoints: []string{cl.etcd}, Cluster: cl.cluster})
	ctx := context.Background()
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	args := []string{"agent", "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--metrics", "", "--holder", "node-a",
		"--etcd", cl.etcd, "--cluster", cl.cluster}
	n := listenNotify(t)
	p := startDaemon(t, bin, n, nil, args...)
	p.await(t, n, "READY=1")
	if o, _, err := run(t, "map", "v", "--nbd-listen", "127.0.0.1:0", "--agent", sock); err != nil || !strings.HasPrefix(o, "mapped: nbd://") {
		t.Fatalf("map --agent: %q, %v", o, err)
	}
	// restart stops the agent, records the scrub it leaves running when
	// it stops in the middle of one, and runs hold (the test's part while
	// the agent is down) before it starts the agent again.
	restart := func(hold func()) {
		t.Helper()
		p.stop(t, n)
		if err := s.PutTask(ctx, &meta.TaskRecord{ID: meta.ScrubTaskID("v"), Kind: meta.TaskScrub, Volume: "v", Holder: "node-a",
			State: meta.TaskRunning}); err != nil {
			t.Fatal(err)
		}
		hold()
		n = listenNotify(t)
		p = startDaemon(t, bin, n, nil, args...)
		p.await(t, n, "READY=1")
	}
	scrubWait := func(out *testutil.Buffer) chan error {
		ended := make(chan error, 1)
		go func() {
			ended <- Run(ctx, []string{"admin", "scrub", "v", "--wait", "--owner-grace", "10m", "--timeout", "0",
				"--etcd", cl.etcd, "--cluster", cl.cluster}, out, &testutil.Buffer{})
		}()
		return ended
	}
	printed := func(out *testutil.Buffer, ended chan error, what string) {
		t.Helper()
		testutil.WaitFor(t, "scrub --wait to print "+what, func() bool { return strings.Contains(out.String(), what) || len(ended) > 0 })
		if !strings.Contains(out.String(), what) {
			t.Fatalf("scrub --wait ended (%v) before printing %q:\n%s", <-ended, what, out.String())
		}
	}
	done := func(out *testutil.Buffer, ended chan error) {
		t.Helper()
		if err := <-ended; err != nil || !strings.Contains(out.String(), "volume v: scrub done: ") {
			t.Fatalf("scrub --wait across an agent restart: %v\n%s", err, out.String())
		}
	}

	// The wait starts while the agent is down.
	out := &testutil.Buffer{}
	var ended chan error
	restart(func() {
		ended = scrubWait(out)
		printed(out, ended, "volume v: nobody maps it read-write now: waiting up to 10m0s for an owner to map it (restarting?)")
	})
	printed(out, ended, "volume v: scrub running in node-a (task scrub-v)")
	done(out, ended)

	// The wait follows the scrub when the agent stops.
	out = &testutil.Buffer{}
	restart(func() {
		o, err := s.Acquire(ctx, "v", meta.OwnerOptions{Holder: "node-a", TTL: 5 * time.Second}) // node-a before its stop
		if err != nil {
			t.Fatal(err)
		}
		ended = scrubWait(out)
		printed(out, ended, "volume v: scrub running in node-a (task scrub-v)")
		o.Release(ctx)
		printed(out, ended, "volume v: node-a, which runs its scrub, does not map it now (nobody maps it read-write): waiting up to 10m0s")
	})
	done(out, ended)
}
