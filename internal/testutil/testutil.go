// Package testutil holds the helpers that tests across the repository
// share: WaitFor, the one polling wait for a condition. It is imported by
// _test.go files only.
package testutil

import (
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/retry"
)

// WaitLimit bounds every WaitFor. It only stops a test that would hang; no
// test asserts how long a wait took.
const WaitLimit = 90 * time.Second

// WaitFor polls cond until it holds, failing t ("timed out waiting for
// what") after WaitLimit. It polls at once, then after waits growing from
// 1ms to 50ms, so a condition that holds soon is seen soon and a slow one
// (an etcd read, a process starting) is not polled in a busy loop.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitFor(t, WaitLimit, what, cond)
}

func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	waits := retry.NewBackoff(retry.Options{Initial: time.Millisecond, Max: 50 * time.Millisecond})
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(waits.Next())
	}
}
