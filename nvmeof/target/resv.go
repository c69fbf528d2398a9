package target

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// Reservations follow NVMe base spec 2.0 §8.19 and Linux nvmet
// (drivers/nvme/target/pr.c); the differences are noted where they are.
//
// Registrations belong to host identifiers (Connect's HOSTID), so every
// controller of a host shares them. The state of a namespace is an
// immutable resvState swapped atomically; I/O commands load it once. A
// command that changes it runs under reservations.mu, stores the result
// (when the namespace persists reservations) and only then publishes it.

// hostID is a 128-bit host identifier.
type hostID = [16]byte

// registration is one registered host and its key.
type registration struct {
	Host hostID
	Key  uint64
}

// resvState is a snapshot of a namespace's registrations and reservation.
// Invariants: at most one registration per host; for types other than the
// all-registrants ones the holder is registered; with no registrants
// there is no reservation.
type resvState struct {
	Gen    uint32
	Type   pdu.ResvType
	Holder hostID // types 1-4 only
	Regs   []registration
	// byHost indexes Regs when there are many, for the per-command check;
	// built by seal on published states only.
	byHost map[hostID]struct{}
}

// indexMin is the registrant count from which a published state gets a
// map index (below it a scan is cheaper than hashing a 16-byte key).
const indexMin = 8

// seal prepares a state for publication.
func (st *resvState) seal() *resvState {
	if len(st.Regs) >= indexMin {
		st.byHost = make(map[hostID]struct{}, len(st.Regs))
		for _, g := range st.Regs {
			st.byHost[g.Host] = struct{}{}
		}
	}
	return st
}

// reservations is one namespace's reservation state.
type reservations struct {
	mu    sync.Mutex // serializes the commands that change state
	state atomic.Pointer[resvState]
	store *resvStore // nil: kept in memory only (PTPLS 0)
}

// load returns the current state; never nil.
func (r *reservations) load() *resvState {
	if st := r.state.Load(); st != nil {
		return st
	}
	return &resvState{}
}

func (st *resvState) find(h hostID) int {
	for i, g := range st.Regs {
		if g.Host == h {
			return i
		}
	}
	return -1
}

func (st *resvState) registered(h hostID) bool {
	if st.byHost != nil {
		_, ok := st.byHost[h]
		return ok
	}
	return st.find(h) >= 0
}

// holds reports whether h holds the reservation: every registrant does
// under the all-registrants types.
func (st *resvState) holds(h hostID) bool {
	switch {
	case st.Type == pdu.ResvNone:
		return false
	case st.Type.AllRegistrants():
		return st.registered(h)
	}
	return st.Holder == h
}

// isWriteOp reports whether an I/O opcode belongs to the write group
// that reservations guard (nvmet: write, flush, write zeroes, DSM).
func isWriteOp(op uint8) bool {
	return op == pdu.IOWrite || op == pdu.IOFlush || op == pdu.IOWriteZeroes || op == pdu.IODSM
}

// allows reports whether host h may run an I/O command with opcode op.
func (st *resvState) allows(h hostID, op uint8) bool {
	if st == nil || st.Type == pdu.ResvNone {
		return true
	}
	guarded := isWriteOp(op) || (op == pdu.IORead && st.Type.ExclusiveAccess())
	if !guarded || st.holds(h) {
		return true
	}
	return st.Type.RegistrantsOnly() && st.registered(h)
}

// clone copies st for modification.
func (st *resvState) clone() *resvState {
	c := *st
	c.Regs, c.byHost = slices.Clone(st.Regs), nil
	return &c
}

// remove drops h's registration. A holder leaving releases a reservation
// of types 1-4; an all-registrants reservation ends with its last
// registrant.
func (st *resvState) remove(h hostID) {
	i := st.find(h)
	if i < 0 {
		return
	}
	st.Regs = slices.Delete(st.Regs, i, i+1)
	if st.Type.AllRegistrants() && len(st.Regs) == 0 || !st.Type.AllRegistrants() && st.Holder == h {
		st.Type, st.Holder = pdu.ResvNone, hostID{}
	}
}

// removeKey drops every registration with key k except self's and
// returns the hosts dropped.
func (st *resvState) removeKey(k uint64, self hostID) []hostID {
	var out []hostID
	for _, g := range slices.Clone(st.Regs) {
		if g.Key == k && g.Host != self {
			st.remove(g.Host)
			out = append(out, g.Host)
		}
	}
	return out
}

// removeOthers drops every registration but self's.
func (st *resvState) removeOthers(self hostID) []hostID {
	var out []hostID
	for _, g := range slices.Clone(st.Regs) {
		if g.Host != self {
			st.remove(g.Host)
			out = append(out, g.Host)
		}
	}
	return out
}

// resvResult is the outcome of a state-changing reservation command.
type resvResult struct {
	next      *resvState // nil: unchanged
	st        pdu.Status
	preempted []hostID // hosts whose registration a preempt removed
}

func conflict() resvResult { return resvResult{st: pdu.MakeStatus(pdu.SCReservationConflict, true)} }

func invalidField() resvResult { return resvResult{st: pdu.MakeStatus(pdu.SCInvalidField, true)} }

// register runs Reservation Register for host h. Every successful action
// bumps the generation, as in nvmet.
func (st *resvState) register(h hostID, c pdu.ResvCmd, crkey, nrkey uint64) resvResult {
	i := st.find(h)
	next := st.clone()
	switch c.Action {
	case pdu.ResvRegisterActionRegister:
		if i >= 0 && st.Regs[i].Key != nrkey {
			return conflict()
		}
		if i < 0 {
			next.Regs = append(next.Regs, registration{Host: h, Key: nrkey})
		}
	case pdu.ResvRegisterActionUnregister:
		if i < 0 || !c.IEKey && st.Regs[i].Key != crkey {
			return conflict()
		}
		next.remove(h)
	case pdu.ResvRegisterActionReplace:
		if i < 0 || !c.IEKey && st.Regs[i].Key != crkey {
			return conflict()
		}
		next.Regs[i].Key = nrkey
	default:
		return invalidField()
	}
	next.Gen++
	return resvResult{next: next}
}

// acquire runs Reservation Acquire for host h, which must be registered
// with key crkey. Preempts bump the generation.
//
// Unlike nvmet, which keeps one holder even for the all-registrants
// types, every registrant holds those: a registrant acquiring the same
// all-registrants type succeeds. A preempt never removes the caller's
// own registration.
func (st *resvState) acquire(h hostID, c pdu.ResvCmd, crkey, prkey uint64) resvResult {
	if c.IEKey || !c.Type.Valid() {
		return invalidField()
	}
	if i := st.find(h); i < 0 || st.Regs[i].Key != crkey {
		return conflict()
	}
	switch c.Action {
	case pdu.ResvAcquireActionAcquire:
		return st.acquireOnly(h, c.Type)
	case pdu.ResvAcquireActionPreempt, pdu.ResvAcquireActionPreemptAbrt:
		r := st.preempt(h, c.Type, prkey)
		if r.next != nil {
			r.next.Gen++
		}
		return r
	}
	return invalidField()
}

func (st *resvState) acquireOnly(h hostID, t pdu.ResvType) resvResult {
	switch {
	case st.Type == pdu.ResvNone:
		next := st.clone()
		next.Type, next.Holder = t, h
		if t.AllRegistrants() {
			next.Holder = hostID{}
		}
		return resvResult{next: next}
	case st.holds(h) && st.Type == t:
		return resvResult{}
	}
	return conflict()
}

// preempt removes the registrations with key prkey and, where the spec
// says so, makes h the holder of a type-t reservation.
func (st *resvState) preempt(h hostID, t pdu.ResvType, prkey uint64) resvResult {
	next := st.clone()
	setHolder := func() {
		next.Type, next.Holder = t, h
		if t.AllRegistrants() {
			next.Holder = hostID{}
		}
	}
	var gone []hostID
	switch {
	case st.Type == pdu.ResvNone || st.Type.AllRegistrants() && prkey != 0:
		gone = next.removeKey(prkey, h)
		if len(gone) == 0 {
			return conflict()
		}
	case st.Type.AllRegistrants(): // prkey 0: take over alone
		gone = next.removeOthers(h)
		setHolder()
	case st.Holder == h:
		setHolder()
		gone = next.removeKey(prkey, h)
	case prkey == st.keyOf(st.Holder):
		gone = next.removeKey(prkey, h)
		setHolder()
	case prkey != 0:
		gone = next.removeKey(prkey, h)
		if len(gone) == 0 {
			return conflict()
		}
	default:
		return invalidField()
	}
	return resvResult{next: next, preempted: gone}
}

func (st *resvState) keyOf(h hostID) uint64 {
	if i := st.find(h); i >= 0 {
		return st.Regs[i].Key
	}
	return 0
}

// release runs Reservation Release for host h, registered with crkey.
// As in nvmet, releasing with a type other than the reservation's is a
// conflict, and a host that does not hold the reservation succeeds
// without effect.
func (st *resvState) release(h hostID, c pdu.ResvCmd, crkey uint64) resvResult {
	if c.IEKey {
		return invalidField()
	}
	if i := st.find(h); i < 0 || st.Regs[i].Key != crkey {
		return conflict()
	}
	switch c.Action {
	case pdu.ResvReleaseActionRelease:
		if !st.holds(h) {
			return resvResult{}
		}
		if st.Type != c.Type {
			return conflict()
		}
		next := st.clone()
		next.Type, next.Holder = pdu.ResvNone, hostID{}
		return resvResult{next: next}
	case pdu.ResvReleaseActionClear:
		return resvResult{next: &resvState{Gen: st.Gen + 1}}
	}
	return invalidField()
}

// report builds the Reservation Report data (extended data structure).
func (st *resvState) report(ptpl bool) *pdu.ResvStatus {
	out := &pdu.ResvStatus{Gen: st.Gen, Type: st.Type, PTPL: ptpl, Count: len(st.Regs)}
	for _, g := range st.Regs {
		out.Registrants = append(out.Registrants, pdu.Registrant{
			CNTLID: pdu.CNTLIDDynamic, Holder: st.holds(g.Host), Key: g.Key, HostID: g.Host})
	}
	return out
}
