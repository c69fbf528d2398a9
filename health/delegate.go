package health

import (
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/memberlist"
)

// delegate is memberlist's view of a Node: it serves the local Meta and
// turns membership callbacks into Member events and its own member list.
// (memberlist's Members returns pointers into state it keeps changing, so
// reading them races; the callbacks run under memberlist's lock and copy.)
type delegate struct {
	mu      sync.Mutex // guards meta and members
	meta    Meta
	members map[string]Member // alive members by name
	onEvent func(Member)
	logf    func(format string, args ...any)
}

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
)

func (d *delegate) setMeta(m Meta) {
	d.mu.Lock()
	d.meta = m
	d.mu.Unlock()
}

// NodeMeta returns the encoded local Meta (validated before it was set).
func (d *delegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := d.meta.Encode()
	if err != nil || len(b) > limit {
		d.logfOrDiscard()("health: meta not sent: %d bytes, limit %d, err %v", len(b), limit, err)
		return nil
	}
	return b
}

func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// memberlist reports a member's status by callback only: Node.State is not
// kept up to date, and a member that left cannot be told from one that died.

func (d *delegate) NotifyJoin(n *memberlist.Node)   { d.emit(n, StatusAlive) }
func (d *delegate) NotifyLeave(n *memberlist.Node)  { d.emit(n, StatusDead) }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.emit(n, StatusAlive) }

func (d *delegate) emit(n *memberlist.Node, st Status) {
	m := d.member(n, st)
	d.mu.Lock()
	if st == StatusAlive {
		d.members[m.Name] = m
	} else {
		delete(d.members, m.Name)
	}
	d.mu.Unlock()
	if d.onEvent != nil {
		d.onEvent(m)
	}
}

// alive returns the alive members sorted by name.
func (d *delegate) alive() []Member {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Member, 0, len(d.members))
	for _, m := range d.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// member converts a memberlist node, decoding its Meta.
func (d *delegate) member(n *memberlist.Node, st Status) Member {
	m := Member{Name: n.Name, Addr: n.Address(), Status: st}
	if len(n.Meta) > 0 {
		meta, err := DecodeMeta(n.Meta)
		if err != nil {
			d.logfOrDiscard()("health: member %s: %v", n.Name, err)
		}
		m.Meta = meta
	}
	return m
}

func (d *delegate) logfOrDiscard() func(string, ...any) {
	if d.logf != nil {
		return d.logf
	}
	return func(string, ...any) {}
}

// logWriter adapts a Logf to the io.Writer memberlist's log.Logger needs.
type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	w.logf("%s", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
