package volclient

import (
	"context"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/internal/retry"
	"github.com/nvstripe/nvstripe/meta"
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
)

// PathState is one path of a namespace as this node sees it.
type PathState struct {
	Namespace string
	Addr      string // as in the namespace record: tcp://HOST:PORT
	State     string // meta's ANA state names; meta.ANAUnknown while not connected
}

// pather is what an initiator.Device tells about its paths.
type pather interface{ Paths() []initiator.PathStats }

// usable says whether IO may go to a path in state s.
func usable(s string) bool { return s == meta.ANAOptimized || s == meta.ANANonOptimized }

// watchPaths publishes, every interval until ctx ends, the paths whose
// state changed (reportPaths).
func (n *Namespaces) watchPaths(ctx context.Context, every time.Duration) {
	defer close(n.watchDone)
	retry.Every(ctx, every, func() { n.reportPaths(ctx) })
}

// reportPaths compares every connected namespace's paths with what was last
// published: a changed path is recorded in etcd (meta.Store.SetPathState),
// handed to OnPathState and logged; a namespace whose last usable path went
// is logged as a warning.
func (n *Namespaces) reportPaths(ctx context.Context) {
	n.mu.Lock()
	devs := make(map[string]pather, len(n.devs))
	for id, d := range n.devs {
		if p, ok := d.(pather); ok {
			devs[id] = p
		}
	}
	n.mu.Unlock()
	for id, d := range devs {
		prev := n.published[id]
		if prev == nil {
			rec, err := n.store.Namespace(ctx, id)
			if err != nil {
				continue
			}
			prev = map[string]string{}
			for _, p := range rec.Paths {
				prev[p.Addr] = p.ANAState
			}
			n.published[id] = prev
		}
		wasUsable, nowUsable := false, false
		for _, ps := range d.Paths() {
			st := meta.ANAUnknown
			if ps.Connected && ps.ANA.Valid() {
				st = ps.ANA.String()
			}
			addr := "tcp://" + strings.TrimPrefix(ps.Addr, "tcp://")
			old, seen := prev[addr]
			wasUsable, nowUsable = wasUsable || usable(old), nowUsable || usable(st)
			if seen && old == st {
				continue
			}
			if err := n.store.SetPathState(ctx, id, addr, 0, st); err != nil && ctx.Err() == nil {
				n.opts.Logf("[WARN] namespace %s: recording path %s as %s: %v", id, addr, st, err)
				continue
			}
			prev[addr] = st
			if n.opts.OnPathState != nil {
				n.opts.OnPathState(PathState{Namespace: id, Addr: addr, State: st})
			}
			if seen {
				n.opts.Logf("%snamespace %s: path %s %s -> %s", level(usable(old) && !usable(st)), id, addr, old, st)
			}
		}
		if wasUsable && !nowUsable {
			n.opts.Logf("[ERR] namespace %s: every path lost: IO to it fails over to the volume's parity", id)
		}
	}
}

// level tags a path line: a path that stopped being usable is a warning.
func level(warn bool) string {
	if warn {
		return "[WARN] "
	}
	return ""
}
