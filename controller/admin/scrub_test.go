package admin

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/meta/storetest"
)

// TestScrubAllSkipsUnmapped: ScrubAll (ScrubNamed of none) goes through
// every volume and skips those nobody maps read-write, where Scrub of the
// named volume (ScrubNamed of it) fails.
func TestScrubAllSkipsUnmapped(t *testing.T) {
	s := fixture(t, 6)
	ctx := context.Background()
	var out strings.Builder
	res, err := ScrubAll(ctx, &out, s, ScrubOptions{})
	if err != nil || len(res) != 1 || res[0].Volume != "v" || res[0].Skipped == "" {
		t.Fatalf("ScrubAll: %+v %v, want v skipped", res, err)
	}
	if !strings.Contains(out.String(), "volume v: skipped") {
		t.Fatalf("ScrubAll printed %q", out.String())
	}
	if _, err := Scrub(ctx, &out, s, []string{"v"}, true, ScrubOptions{}); err == nil {
		t.Fatal("Scrub of an unmapped named volume succeeded")
	}
	if res, err := ScrubNamed(ctx, &out, s, nil, ScrubOptions{}); err != nil || len(res) != 1 || res[0].Skipped == "" {
		t.Errorf("ScrubNamed of none: %+v %v, want v skipped", res, err)
	}
	if _, err := ScrubNamed(ctx, &out, s, []string{"v"}, ScrubOptions{}); err == nil {
		t.Error("ScrubNamed of an unmapped volume succeeded")
	}
}

// own takes the read-write ownership of volume v as holder, as an agent
// mapping it does.
func own(t *testing.T, s *meta.Store, holder string) *meta.Owner {
	t.Helper()
	o, err := s.Acquire(context.Background(), "v", meta.OwnerOptions{Holder: holder, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Release(context.Background()) })
	return o
}

// playScrub writes what the owner of v's running scrub wrote.
func playScrub(t *testing.T, s *meta.Store, done, total int64) {
	t.Helper()
	storetest.PlayScrub(t, s, "v", done, total)
}

// TestScrubWaitFollowsOwnerBack: a wait whose scrub's owner stops mapping
// the volume (an agent restarting unmaps it) says that it waits for the
// owner, and once the owner maps the volume again it follows the scrub
// there to its end, instead of ending blocked.
func TestScrubWaitFollowsOwnerBack(t *testing.T) {
	s := fixture(t, 6)
	owner := own(t, s, "node-1")
	var out testutil.Buffer
	type result struct {
		res []ScrubResult
		err error
	}
	ended := make(chan result, 1)
	go func() {
		res, err := Scrub(context.Background(), &out, s, []string{"v"}, true, ScrubOptions{Wait: true, OwnerGrace: time.Hour})
		ended <- result{res, err}
	}()
	// said waits until the wait prints what, failing at once when it
	// ends first.
	said := func(what string) {
		t.Helper()
		testutil.WaitFor(t, "the wait to print "+what, func() bool { return strings.Contains(out.String(), what) || len(ended) > 0 })
		if !strings.Contains(out.String(), what) {
			r := <-ended
			t.Fatalf("the wait ended (%+v, %v) before printing %q:\n%s", r.res, r.err, what, out.String())
		}
	}
	said("volume v: scrub running in node-1 (task scrub-v)")
	playScrub(t, s, 1, 4)
	owner.Release(context.Background()) // the agent stops
	said("volume v: node-1, which runs its scrub, does not map it now (nobody maps it read-write): waiting up to 1h0m0s for it to map it again")
	own(t, s, "node-1") // the agent is back
	said("volume v: node-1 maps it again: its scrub goes on from segment 1 of 4")
	playScrub(t, s, 4, 4)
	r := <-ended
	if r.err != nil || len(r.res) != 1 || r.res[0].State != meta.TaskDone || r.res[0].Done != 4 {
		t.Fatalf("Scrub --wait over an owner restart: %+v %v\n%s", r.res, r.err, out.String())
	}
	if !strings.Contains(out.String(), "volume v: scrub done: 4 of 4 segments") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestScrubWaitBlockedWithoutOwner: a wait whose scrub's owner does not map
// the volume again within the grace ends blocked, saying where the scrub
// stopped and what to do: map it at the owner again, or scrub it again
// where another owner maps it now.
func TestScrubWaitBlockedWithoutOwner(t *testing.T) {
	s := fixture(t, 6)
	owner := own(t, s, "node-1")
	var out testutil.Buffer
	ended := make(chan error, 1)
	go func() {
		_, err := Scrub(context.Background(), &out, s, []string{"v"}, true, ScrubOptions{Wait: true, OwnerGrace: time.Millisecond})
		ended <- err
	}()
	testutil.WaitFor(t, "the scrub to start", func() bool { return strings.Contains(out.String(), "scrub running in node-1") })
	playScrub(t, s, 1, 4)
	owner.Release(context.Background()) // and it does not come back
	err := <-ended
	var we *WaitError
	want := "volume v: node-1, which runs its scrub, did not map it again within 1ms (nobody maps it read-write): " +
		"the scrub resumes at segment 1 of 4 when node-1 maps it again; map it there, or run `nvstripe admin scrub v` once it is mapped elsewhere"
	if !errors.Is(err, ErrWaitBlocked) || !errors.As(err, &we) || we.Reason != want || !strings.HasPrefix(err.Error(), "not finished (blocked): scrub of volume v: 1 of 4 segments") {
		t.Fatalf("wait without the owner: %v, want blocked: %s", err, want)
	}
	if !strings.Contains(out.String(), "volume v: node-1, which runs its scrub, does not map it now (nobody maps it read-write): waiting up to 1ms") {
		t.Errorf("the wait did not say what it waited for:\n%s", out.String())
	}

	// Another owner maps it meanwhile: the scrub addressed to node-1
	// does not run there.
	own(t, s, "node-2")
	_, err = waitTask(context.Background(), io.Discard, s, meta.ScrubTaskID("v"), time.Millisecond)
	want = "volume v: node-1, which runs its scrub, did not map it again within 1ms (node-2 maps it now): " +
		"the scrub, stopped at segment 1 of 4, runs only at node-1; run `nvstripe admin scrub v` again to scrub it at node-2"
	if !errors.As(err, &we) || !errors.Is(err, ErrWaitBlocked) || we.Reason != want {
		t.Fatalf("wait with another owner: %v, want blocked: %s", err, want)
	}
}

// TestScrubWaitStartsWhenMapped: a scrub --wait of a named volume nobody
// maps read-write now (its agent restarting) says that it waits for an
// owner, starts the scrub once one maps the volume and follows it to its
// end; with no owner within the grace it fails as before, saying to map
// the volume.
func TestScrubWaitStartsWhenMapped(t *testing.T) {
	s := fixture(t, 6)
	var out testutil.Buffer
	ended := make(chan error, 1)
	go func() {
		_, err := Scrub(context.Background(), &out, s, []string{"v"}, true, ScrubOptions{Wait: true, OwnerGrace: time.Hour})
		ended <- err
	}()
	for _, step := range []struct {
		want string
		then func()
	}{
		{"volume v: nobody maps it read-write now: waiting up to 1h0m0s for an owner to map it (restarting?)", func() { own(t, s, "node-1") }},
		{"volume v: scrub running in node-1 (task scrub-v)", func() { playScrub(t, s, 4, 4) }},
		{"volume v: scrub done: 4 of 4 segments", func() {}},
	} {
		testutil.WaitFor(t, "the wait to print "+step.want, func() bool { return strings.Contains(out.String(), step.want) || len(ended) > 0 })
		if !strings.Contains(out.String(), step.want) {
			t.Fatalf("the wait ended (%v) before printing %q:\n%s", <-ended, step.want, out.String())
		}
		step.then()
	}
	if err := <-ended; err != nil {
		t.Fatalf("scrub --wait of a volume mapped after it started: %v\n%s", err, out.String())
	}

	s = fixture(t, 6)
	_, err := Scrub(context.Background(), io.Discard, s, []string{"v"}, true, ScrubOptions{Wait: true, OwnerGrace: time.Millisecond})
	if !errors.Is(err, meta.ErrInvalid) || !strings.Contains(err.Error(), "volume v is not mapped read-write: its owner runs the scrub, map it first") {
		t.Fatalf("scrub --wait of a volume nobody maps: %v, want not mapped read-write", err)
	}
}
