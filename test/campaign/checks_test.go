package campaign

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/controller/admin"
	"github.com/nvstripe/nvstripe/meta"
)

// The findings of the checks, by class.
var (
	errLost      = errors.New("acknowledged data lost")
	errBadBlocks = errors.New("scrub found bad blocks")
	errLeak      = errors.New("leak")
	// errLostRO is errLost of the read-only volume: the recovery after
	// the round writes its content again.
	errLostRO = fmt.Errorf("%w (read-only volume)", errLost)
)

// checked is what one round's checks looked at.
type checked struct {
	blocks  int   // rwVolume blocks read back
	roBytes int64 // roVolume bytes read back
	// unsettled: rwVolume blocks of failed writes that read EIO after a
	// round whose faults went past what parity covers (workload.verify).
	unsettled int
	segments  int64 // segments scrubbed
}

// ensureOwner restarts the owner when it runs but no longer holds
// rwVolume read-write (a mapping fenced by an etcd outage stays fenced).
func (c *cluster) ensureOwner(ctx context.Context, s *meta.Store) error {
	owned, err := holds(ctx, s, rwVolume, ownerName, meta.ModeRW)
	if err != nil || owned {
		return err
	}
	c.fenced++
	fmt.Fprintf(c.logw, "campaign: the owner runs but does not hold %s: restarting it\n", rwVolume)
	c.stop(c.owner)
	return c.tryStartMap(c.owner)
}

// awaitOwner waits until the owner holds rwVolume read-write, which it
// may not yet since ensureOwner: after an etcd kill the agent's attempt to
// take the volume again that started while etcd was down waits out its
// timeout (30 s) before the next one, which takes it. It restarts the
// owner once when it does not within ownerWait: the scrub that follows
// runs through the owner.
func (c *cluster) awaitOwner(ctx context.Context, s *meta.Store) error {
	for restarted := false; ; restarted = true {
		deadline := time.Now().Add(ownerWait)
		for time.Now().Before(deadline) {
			if owned, err := holds(ctx, s, rwVolume, ownerName, meta.ModeRW); err == nil && owned {
				return nil
			}
			time.Sleep(200 * time.Millisecond)
		}
		if restarted {
			return fmt.Errorf("the owner did not hold %s read-write within %v of a restart", rwVolume, ownerWait)
		}
		if err := c.ensureOwner(ctx, s); err != nil {
			return err
		}
	}
}

// scrubOwned scrubs rwVolume through its owner once the owner holds it
// (awaitOwner), and again, up to twice, when the owner lost it meanwhile
// (the scrub then fails as blocked, or as the volume not mapped).
func (c *cluster) scrubOwned(ctx context.Context, s *meta.Store) (int64, error) {
	for try := 0; ; try++ {
		if err := c.awaitOwner(ctx, s); err != nil {
			return 0, err
		}
		n, err := scrub(ctx, s, rwVolume)
		if try == 2 || !(errors.Is(err, admin.ErrWaitBlocked) || errors.Is(err, meta.ErrInvalid)) {
			return n, err
		}
		fmt.Fprintf(c.logw, "campaign: scrub of %s through its owner: %v: again once the owner holds it\n", rwVolume, err)
	}
}

// ownerWait bounds awaitOwner's wait for the owner to hold the volume.
const ownerWait = 2 * time.Minute

func holds(ctx context.Context, s *meta.Store, volume, holder, mode string) (bool, error) {
	owners, err := s.Owners(ctx, volume)
	for _, o := range owners {
		if o.Holder == holder && o.Mode == mode {
			return true, err
		}
	}
	return false, err
}

// check runs the checks of a healed, healthy cluster: scrub rwVolume
// through its owner, read every acknowledged block back through a fresh
// read-only mapping, then scrub and read roVolume through a fresh mapping
// (read-write when the reader is detached, read-only beside it when it is
// attached), and look for leaked slots and tasks left running. It leaves
// the owner running again.
func (c *cluster) check(ctx context.Context, s *meta.Store, w *workload, readerAttached bool) (checked, error) {
	var got checked
	n, err := c.scrubOwned(ctx, s)
	if err != nil {
		return got, err
	}
	got.segments += n
	c.stop(c.owner)
	// No write of the round that failed can land from here on: the
	// workload stopped soon after the heal, the owner that took its
	// writes has exited (with it every shard write it had in flight; its
	// recovery, and the scrub's settling of rows, ran through it above),
	// no other read-write holder of rwVolume runs until the verifier's
	// reads below (read-only: it writes nothing), and a row a failed write
	// left unsettled reads as failed, which the history leaves out. The
	// verify already took a readable block's value as final across
	// rounds (workload.match drops its failed versions); this is the same
	// bound within the round.
	w.history().failedWritesEnd()
	if err := c.withMap("verifier", rwVolume, true, func(addr string) error {
		var err error
		got.blocks, err = w.verify(ctx, addr)
		got.unsettled = w.unsettledBlocks()
		if got.unsettled > 0 {
			fmt.Fprintf(c.logw, "campaign: %d blocks of failed writes read EIO (unsettled rows of writes past what parity covers)\n", got.unsettled)
		}
		return err
	}); err != nil {
		return got, err
	}
	if err := c.tryStartMap(c.owner); err != nil {
		return got, fmt.Errorf("%s: %w", c.owner.name, err)
	}
	if got.roBytes, got.segments, err = c.checkReadOnly(ctx, s, w, readerAttached, got.segments); err != nil {
		return got, err
	}
	return got, leaks(ctx, s, c.knownLeaks)
}

// checkReadOnly scrubs roVolume (unless the reader is attached: a scrub
// needs the read-write lease) and reads it all back through a fresh
// mapping.
func (c *cluster) checkReadOnly(ctx context.Context, s *meta.Store, w *workload, readerAttached bool, segments int64) (int64, int64, error) {
	var bytes int64
	err := c.withMap("checker", roVolume, readerAttached, func(addr string) error {
		if !readerAttached {
			n, err := scrub(ctx, s, roVolume)
			if err != nil {
				return err
			}
			segments += n
		}
		var err error
		bytes, err = verifyRO(ctx, addr, w.history())
		return err
	})
	return bytes, segments, err
}

// withMap maps volume afresh (read-only or read-write) over NBD, runs fn
// with the export's address and unmaps it.
func (c *cluster) withMap(name, volume string, readOnly bool, fn func(addr string) error) error {
	addr := freePort(c.t)
	args := []string{"map", volume, "--nbd-listen", addr, "--holder", "campaign-" + name}
	if readOnly {
		args = append(args, "--read-only")
	}
	p := c.newProc(name, "serving: ", args...)
	if err := c.tryStartMap(p); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer c.stop(p)
	return fn(addr)
}

// scrub scrubs volume through its read-write owner (admin.Scrub, what
// `admin scrub --wait` runs) and fails on any block bad against its
// checksum and any parity chunk out of step with its stripe's data; it
// returns the segments scrubbed.
func scrub(ctx context.Context, s *meta.Store, volume string) (int64, error) {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	res, err := admin.Scrub(sctx, io.Discard, s, []string{volume}, true, admin.ScrubOptions{Wait: true})
	if err != nil {
		return 0, fmt.Errorf("scrub of %s: %w", volume, err)
	}
	var n int64
	for _, r := range res {
		if r.State != meta.TaskDone || r.Found != 0 || r.Parity != 0 || r.Done != r.Total {
			err := fmt.Errorf("scrub of %s: %s, %d of %d segments, %d blocks bad (checksums), %d healed, %d parity chunks out of step %s",
				volume, r.State, r.Done, r.Total, r.Found, r.Healed, r.Parity, r.Error)
			if r.Found != 0 || r.Parity != 0 {
				err = fmt.Errorf("%w: %w", errBadBlocks, err)
			}
			return n, err
		}
		n += r.Done
	}
	return n, nil
}

// taskGrace is how long the leak check waits for running tasks to end.
// The controller may start moves after the cluster was judged healthy: a
// target killed and restarted comes back on a new gossip port, which the
// pool refuses while its old address is merely suspect; once that one is
// declared dead the target is judged down until its next push-pull with
// the pool (30 s on the LAN profile), so it is marked out and its shards
// rebuilt, seconds after the round's wait for health. Such moves end in
// well under a second; a task still running after taskGrace is left
// running.
var taskGrace = 2 * time.Minute

// awaitTasks waits up to within for no task to be running.
func awaitTasks(ctx context.Context, s *meta.Store, within time.Duration) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		tasks, err := s.Tasks(ctx)
		if err == nil && !slices.ContainsFunc(tasks, func(t *meta.TaskRecord) bool { return t.State == meta.TaskRunning }) {
			return
		}
	}
}

// leaks compares, at one revision, the slots every namespace's allocation
// bitmap marks used with the slots the volumes' segment maps reference
// (moves in flight included), and fails on any task still running once
// taskGrace has passed. The findings in known (those of earlier rounds)
// are not reported again; new ones are added to it (known may be nil).
func leaks(ctx context.Context, live *meta.Store, known map[string]bool) error {
	awaitTasks(ctx, live, taskGrace)
	s, err := live.At(ctx)
	if err != nil {
		return err
	}
	refs, err := referenced(ctx, s)
	if err != nil {
		return err
	}
	nss, err := s.Namespaces(ctx)
	if err != nil {
		return err
	}
	allocs := map[string]*meta.AllocRecord{}
	for _, ns := range nss {
		if allocs[ns.ID], err = s.Allocation(ctx, ns.ID); err != nil {
			return err
		}
	}
	bad := compareSlots(allocs, refs)
	tasks, err := s.Tasks(ctx)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if t.State == meta.TaskRunning {
			bad = append(bad, fmt.Sprintf("task %s (%s) left running", t.ID, t.Kind))
		}
	}
	if known != nil {
		bad = slices.DeleteFunc(bad, func(b string) bool { return known[b] })
		for _, b := range bad {
			known[b] = true
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %d: %s", errLeak, len(bad), strings.Join(bad, "; "))
	}
	return nil
}

// referenced is every slot a segment of a volume holds or moves to/from.
func referenced(ctx context.Context, s *meta.Store) (map[meta.SlotRef]bool, error) {
	vols, err := s.Volumes(ctx)
	if err != nil {
		return nil, err
	}
	refs := map[meta.SlotRef]bool{}
	for _, v := range vols {
		vm, err := s.VolumeMap(ctx, v.Name, nil)
		if err != nil {
			return nil, err
		}
		segs, _, err := vm.Segments(ctx)
		if err != nil {
			return nil, err
		}
		for _, seg := range segs {
			for _, r := range seg.Slots {
				refs[r] = true
			}
			if m := seg.Move; m != nil {
				refs[m.To] = true
				if m.From != nil {
					refs[*m.From] = true
				}
			}
		}
	}
	return refs, nil
}

// compareSlots lists the slots marked used in allocs (by namespace) but
// not in refs, and the reverse; slot 0 (the label) is never a shard's.
func compareSlots(allocs map[string]*meta.AllocRecord, refs map[meta.SlotRef]bool) []string {
	var bad []string
	seen := 0
	for id, al := range allocs {
		for slot := int64(1); slot < al.Slots; slot++ {
			used := al.Bitmap[slot/8]&(1<<(slot%8)) != 0
			ref := refs[meta.SlotRef{NS: id, Slot: slot}]
			if ref {
				seen++
			}
			switch {
			case used && !ref:
				bad = append(bad, fmt.Sprintf("%s/%d allocated, referenced by no segment (leaked)", id, slot))
			case ref && !used:
				bad = append(bad, fmt.Sprintf("%s/%d referenced but free", id, slot))
			}
		}
	}
	if seen != len(refs) {
		bad = append(bad, fmt.Sprintf("%d referenced slots outside every namespace's slots", len(refs)-seen))
	}
	sort.Strings(bad)
	return bad
}
