package volclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/meta"
)

// TestProcessMapAfterHolderKilled: a volume mapped by a `nvstripe map`
// process is refused to others with an error that names that process and
// says what to do; once the process is killed (SIGKILL, its lease left to
// lapse), a map on the same host waits the lease out, saying so, and then
// takes the volume, instead of failing with "in use".
func TestProcessMapAfterHolderKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the nvstripe binary and runs three target processes; not in -short")
	}
	pc := startProcCluster(t, 3)
	ctx := context.Background()
	if _, err := pc.store.CreateVolume(ctx, meta.VolumeSpec{Name: "v", Size: 8 << 20, Layout: meta.Layout{K: 2, M: 1, Chunk: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	holder := startProcMap(t, pc.bin, pc.eps[0], "v", "map.vm", 10*time.Second)
	host, _ := os.Hostname()
	pid := holder.cmd.Process.Pid
	var logMu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logs = append(logs, fmt.Sprintf(format, args...))
	}
	opts := OpenOptions{Holder: "map.other", LeaseTTL: 5 * time.Second, Logf: logf}
	for _, ro := range []bool{false, true} {
		opts.ReadOnly = ro
		_, err := OpenVolume(ctx, pc.store, "v", opts)
		var busy *meta.BusyError
		if !errors.As(err, &busy) || !errors.Is(err, meta.ErrBusy) {
			t.Fatalf("read-only %v beside a live holder: want a BusyError, got %v", ro, err)
		}
		for _, w := range []string{fmt.Sprintf("mapped rw by map.vm (host %s, pid %d, since ", host, pid),
			"not even with --read-only", "run `nvstripe unmap v` on host " + host, "There is no forced takeover"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error lacks %q: %v", w, err)
			}
		}
	}
	if len(logs) != 0 {
		t.Errorf("waited for a live holder: %q", logs)
	}
	_ = holder.cmd.Process.Kill() // SIGKILL: the lease stays until it lapses
	<-holder.exited
	opts.ReadOnly = false
	m, err := OpenVolume(ctx, pc.store, "v", opts)
	if err != nil {
		t.Fatalf("map after the holder died: %v", err)
	}
	defer m.Close(ctx)
	logMu.Lock()
	defer logMu.Unlock()
	want := fmt.Sprintf("volume v: its holder map.vm (pid %d on this host) no longer runs and its lease lapses in ", pid)
	if len(logs) == 0 || !strings.HasPrefix(logs[0], want) || !strings.Contains(logs[0], "waiting") {
		t.Errorf("logs %q, want one starting %q", logs, want)
	}
}

// TestDeadHolderWait decides when a refused map waits for a holder's
// lease: only when every holder in the way is dead.
func TestDeadHolderWait(t *testing.T) {
	runs := func(pid int) bool { return pid == 7 }
	const host = "vm"
	cases := []struct {
		name   string
		owners []meta.OwnerInfo
		wait   time.Duration
		why    string
	}{
		{"alive elsewhere", []meta.OwnerInfo{{Holder: "a", Host: "other", PID: 9, LeaseLeft: 3 * time.Second}}, -1, ""},
		{"alive here", []meta.OwnerInfo{{Holder: "a", Host: host, PID: 7, LeaseLeft: 3 * time.Second}}, -1, ""},
		{"unknown process", []meta.OwnerInfo{{Holder: "a", LeaseLeft: 3 * time.Second}}, -1, ""},
		{"dead here", []meta.OwnerInfo{{Holder: "a", Host: host, PID: 9, LeaseLeft: 3 * time.Second}}, 3500 * time.Millisecond,
			"its holder a (pid 9 on this host) no longer runs and its lease lapses in 3s"},
		{"expired lease", []meta.OwnerInfo{{Holder: "a", Host: "other", PID: 9, LeaseLeft: 0}}, 500 * time.Millisecond,
			"the lease of its holder a has expired and etcd is removing it"},
		{"one dead, one alive", []meta.OwnerInfo{{Holder: "a", Host: host, PID: 9, LeaseLeft: time.Second},
			{Holder: "b", Host: host, PID: 7, LeaseLeft: time.Second}}, -1, ""},
	}
	for _, tc := range cases {
		wait, why := deadHolderWait(&meta.BusyError{Volume: "v", Owners: tc.owners}, host, runs)
		if wait != tc.wait || why != tc.why {
			t.Errorf("%s: got %v %q, want %v %q", tc.name, wait, why, tc.wait, tc.why)
		}
	}
}
