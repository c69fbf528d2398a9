package volclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/meta"
)

// acquire takes ownership of volume name. When every owner in the way is
// dead (etcd has expired its lease but not yet removed its key, or it was
// recorded on this host under a process that no longer runs) it waits for
// the lease to lapse, saying so through logf, and tries again; a holder
// that may be alive gets the BusyError at once.
func acquire(ctx context.Context, store *meta.Store, name string, o OpenOptions, logf func(string, ...any)) (*meta.Owner, error) {
	host, _ := os.Hostname()
	var waited time.Duration
	for {
		owner, err := store.Acquire(ctx, name, meta.OwnerOptions{Holder: o.Holder, ReadOnly: o.ReadOnly, Mover: o.Mover && !o.ReadOnly, TTL: o.LeaseTTL, OnRenewal: o.OnRenewal})
		var busy *meta.BusyError
		if err == nil || !errors.As(err, &busy) {
			return owner, err
		}
		wait, why := deadHolderWait(busy, host, processRuns)
		if wait < 0 || waited > maxDeadHolderWait(busy) {
			return nil, err
		}
		logf("volume %s: %s; waiting %v for etcd to drop its lease", name, why, wait.Round(time.Second))
		if err := retry.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("volume %s: gave up waiting for the lease of a dead holder: %w", name, err)
		}
		waited += wait
	}
}

// deadHolderWait decides whether every owner in busy is dead and how long
// its lease has left: a wait of -1 means one may be alive (do not wait).
// An owner is dead when etcd has expired its lease, or when it ran on host
// (this host) under a process ID that no longer runs.
func deadHolderWait(busy *meta.BusyError, host string, runs func(pid int) bool) (time.Duration, string) {
	wait, why := time.Duration(0), ""
	for _, o := range busy.Owners {
		switch {
		case o.LeaseLeft == 0:
			why = fmt.Sprintf("the lease of its holder %s has expired and etcd is removing it", o.Holder)
		case o.Host != "" && o.Host == host && o.PID > 0 && !runs(o.PID):
			why = fmt.Sprintf("its holder %s (pid %d on this host) no longer runs", o.Holder, o.PID)
			if o.LeaseLeft > 0 {
				wait = max(wait, o.LeaseLeft)
				why += fmt.Sprintf(" and its lease lapses in %v", o.LeaseLeft)
			}
		default:
			return -1, ""
		}
	}
	return wait + 500*time.Millisecond, why
}

// maxDeadHolderWait bounds the waiting for dead holders: twice the longest
// lease TTL among them (a minute when unknown).
func maxDeadHolderWait(busy *meta.BusyError) time.Duration {
	ttl := time.Duration(0)
	for _, o := range busy.Owners {
		ttl = max(ttl, o.LeaseTTL)
	}
	if ttl == 0 {
		return time.Minute
	}
	return 2 * ttl
}

// processRuns says whether a process with ID pid runs on this host.
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
