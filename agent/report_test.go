package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/placement"
)

// fakeStates is an in-memory namespaceStates whose next SetNamespaceState
// calls can be made to fail.
type fakeStates struct {
	state  map[string]placement.State
	fail   int // SetNamespaceState calls left to fail
	marked int // successful SetNamespaceState calls
}

func (f *fakeStates) Namespace(_ context.Context, id string) (*meta.NamespaceRecord, error) {
	return &meta.NamespaceRecord{State: f.state[id].String()}, nil
}

func (f *fakeStates) SetNamespaceState(_ context.Context, id string, st placement.State) error {
	if f.fail > 0 {
		f.fail--
		return errors.New("etcd did not answer")
	}
	f.state[id] = st
	f.marked++
	return nil
}

// TestReportCountsAndReportsAgain: the log names the media errors a
// namespace had when it was reported (not the threshold: here a first
// attempt fails and the report comes one error later), and a namespace an
// operator put back in service is reported again when it fails again,
// not ignored for the rest of the agent's life.
func TestReportCountsAndReportsAgain(t *testing.T) {
	ctx := context.Background()
	st := &fakeStates{state: map[string]placement.State{"a": placement.StateIn}, fail: 1}
	var log testutil.Buffer
	r := newReporter(st, ReportOptions{FailNamespaceAfter: 3}, NewMetrics(), log.Logf)
	r.recheck = 0
	errs := func(n int) {
		for range n {
			if r.due("a") {
				r.report(ctx, "a")
			}
		}
	}
	errs(2)
	if st.marked != 0 {
		t.Fatalf("reported after 2 media errors, threshold 3")
	}
	errs(2) // the third error's report fails; the fourth's succeeds
	if st.marked != 1 || st.state["a"] != placement.StateFailed {
		t.Fatalf("after 4 errors: marked %d times, state %v", st.marked, st.state["a"])
	}
	if !strings.Contains(log.String(), "namespace a reported failed after 4 media errors") {
		t.Errorf("log does not give the count of media errors: %q", log.String())
	}
	errs(3) // failed already: nothing to mark
	if st.marked != 1 {
		t.Fatalf("a namespace already failed marked again")
	}
	st.state["a"] = placement.StateIn // an operator put it back in service
	errs(3)
	if st.marked != 2 || st.state["a"] != placement.StateFailed {
		t.Fatalf("a namespace back in service that failed again was not reported: marked %d times, state %v", st.marked, st.state["a"])
	}
}
