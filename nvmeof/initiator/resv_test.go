package initiator

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// hostDev opens a device on f whose Connect carries host ID id (one
// ownership session's identity).
func hostDev(t *testing.T, f *fixture, id byte) *Device {
	o := f.options(t)
	o.HostID = [16]byte{0: 0xA5, 15: id}
	o.IOQueues = 1
	return open(t, o)
}

// ops are the five guarded operations of the access table.
var resvOps = []struct {
	name  string
	write bool
	run   func(ctx context.Context, d *Device) error
}{
	{"read", false, func(ctx context.Context, d *Device) error { return d.ReadAt(ctx, make([]byte, 4096), 0) }},
	{"write", true, func(ctx context.Context, d *Device) error { return d.WriteAt(ctx, make([]byte, 4096), 4096) }},
	{"flush", true, func(ctx context.Context, d *Device) error { return d.Flush(ctx) }},
	{"write-zeroes", true, func(ctx context.Context, d *Device) error { return d.WriteZeroes(ctx, 8192, 4096) }},
	{"deallocate", true, func(ctx context.Context, d *Device) error { return d.Trim(ctx, 8192, 4096) }},
}

// allowedBySpec is the access table of NVMe base spec 2.0 (table
// "Command behavior in the presence of a reservation"), written out
// independently of the target's code: role 0 holder, 1 registrant, 2 not
// registered.
func allowedBySpec(t pdu.ResvType, role int, write bool) bool {
	exclusiveAccess := t == 2 || t == 4 || t == 6
	switch {
	case role == 0:
		return true
	case role == 1 && t >= 3:
		return true
	case !write && !exclusiveAccess:
		return true
	}
	return false
}

// TestReservationAccessTable checks every reservation type against the
// holder, another registrant and a host that is not registered, for read,
// write, flush, write zeroes and deallocate, over NVMe/TCP.
func TestReservationAccessTable(t *testing.T) {
	f := newFixture(t, 1, 1<<20, nil)
	ctx := context.Background()
	devs := []*Device{hostDev(t, f, 1), hostDev(t, f, 2), hostDev(t, f, 3)}
	roles := []string{"holder", "registrant", "non-registrant"}
	keys := []uint64{0x1111, 0x2222}
	for rt := pdu.ResvWriteExclusive; rt <= pdu.ResvExclusiveAccessAllRegs; rt++ {
		for i, k := range keys {
			if err := devs[i].Register(ctx, RegisterKey, 0, k, false); err != nil {
				t.Fatalf("%v: register %s: %v", rt, roles[i], err)
			}
		}
		if err := devs[0].Acquire(ctx, AcquireOnly, rt, keys[0], 0); err != nil {
			t.Fatalf("%v: acquire: %v", rt, err)
		}
		for role, d := range devs {
			for _, op := range resvOps {
				err := op.run(ctx, d)
				want := allowedBySpec(rt, role, op.write)
				switch {
				case want && err != nil:
					t.Errorf("%v / %s / %s: %v, want success", rt, roles[role], op.name, err)
				case !want && !errors.Is(err, blockdev.ErrFenced):
					t.Errorf("%v / %s / %s: %v, want a reservation conflict (ErrFenced)", rt, roles[role], op.name, err)
				}
			}
		}
		if err := devs[0].Release(ctx, ClearReservations, 0, keys[0]); err != nil {
			t.Fatalf("%v: clear: %v", rt, err)
		}
	}
}

// resvStep is one command of a reservation script and its expected result.
type resvStep struct {
	host int    // device index
	cmd  string // reg, unreg, replace, acquire, preempt, abort, release, clear
	rt   pdu.ResvType
	k1   uint64
	k2   uint64
	ie   bool
	want error // nil, blockdev.ErrFenced or blockdev.ErrInvalid
	// after the step: the report's generation, type and registered keys
	// (host index → key; holders marked by the holder set)
	gen     uint32
	keys    map[int]uint64
	holders []int
}

func (s resvStep) run(ctx context.Context, d *Device) error {
	switch s.cmd {
	case "reg":
		return d.Register(ctx, RegisterKey, s.k1, s.k2, s.ie)
	case "unreg":
		return d.Register(ctx, UnregisterKey, s.k1, s.k2, s.ie)
	case "replace":
		return d.Register(ctx, ReplaceKey, s.k1, s.k2, s.ie)
	case "acquire":
		return d.Acquire(ctx, AcquireOnly, s.rt, s.k1, s.k2)
	case "preempt":
		return d.Acquire(ctx, Preempt, s.rt, s.k1, s.k2)
	case "abort":
		return d.Acquire(ctx, PreemptAndAbort, s.rt, s.k1, s.k2)
	case "release":
		return d.Release(ctx, ReleaseReservation, s.rt, s.k1)
	case "clear":
		return d.Release(ctx, ClearReservations, s.rt, s.k1)
	}
	return fmt.Errorf("unknown step %q", s.cmd)
}

// TestReservationCommands runs register / replace / unregister / acquire
// / preempt / preempt-and-abort / release / clear scripts and checks each
// result and the full report (generation, type, keys, host IDs, holder
// bits) after every step.
func TestReservationCommands(t *testing.T) {
	const we, ea, wero, wear = pdu.ResvWriteExclusive, pdu.ResvExclusiveAccess, pdu.ResvWriteExclusiveRegOnly, pdu.ResvWriteExclusiveAllRegs
	fenced, invalid := blockdev.ErrFenced, blockdev.ErrInvalid
	k := func(kv ...uint64) map[int]uint64 {
		m := map[int]uint64{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[int(kv[i])] = kv[i+1]
		}
		return m
	}
	scripts := map[string][]resvStep{
		"register": {
			{host: 0, cmd: "reg", k2: 10, gen: 1, keys: k(0, 10)},
			{host: 0, cmd: "reg", k2: 10, gen: 2, keys: k(0, 10)},               // same key again: success
			{host: 0, cmd: "reg", k2: 11, want: fenced, gen: 2, keys: k(0, 10)}, // another key: conflict
			{host: 1, cmd: "reg", k2: 20, gen: 3, keys: k(0, 10, 1, 20)},
			{host: 1, cmd: "replace", k1: 99, k2: 21, want: fenced, gen: 3, keys: k(0, 10, 1, 20)},
			{host: 1, cmd: "replace", k1: 20, k2: 21, gen: 4, keys: k(0, 10, 1, 21)},
			{host: 1, cmd: "replace", k1: 99, k2: 22, ie: true, gen: 5, keys: k(0, 10, 1, 22)},
			{host: 2, cmd: "replace", k1: 0, k2: 30, want: fenced, gen: 5, keys: k(0, 10, 1, 22)}, // not registered
			{host: 1, cmd: "unreg", k1: 21, want: fenced, gen: 5, keys: k(0, 10, 1, 22)},
			{host: 1, cmd: "unreg", k1: 22, gen: 6, keys: k(0, 10)},
			{host: 0, cmd: "unreg", k1: 1, ie: true, gen: 7, keys: k()},
			{host: 0, cmd: "unreg", k1: 10, want: fenced, gen: 7, keys: k()},
		},
		"acquire-release": {
			{host: 0, cmd: "reg", k2: 10, gen: 1, keys: k(0, 10)},
			{host: 1, cmd: "reg", k2: 20, gen: 2, keys: k(0, 10, 1, 20)},
			{host: 2, cmd: "acquire", rt: we, k1: 30, want: fenced, gen: 2, keys: k(0, 10, 1, 20)}, // not registered
			{host: 0, cmd: "acquire", rt: we, k1: 11, want: fenced, gen: 2, keys: k(0, 10, 1, 20)}, // wrong key
			{host: 0, cmd: "acquire", rt: 7, k1: 10, want: invalid, gen: 2, keys: k(0, 10, 1, 20)},
			{host: 0, cmd: "acquire", rt: we, k1: 10, gen: 2, keys: k(0, 10, 1, 20), holders: []int{0}},
			{host: 0, cmd: "acquire", rt: we, k1: 10, gen: 2, keys: k(0, 10, 1, 20), holders: []int{0}},
			{host: 0, cmd: "acquire", rt: ea, k1: 10, want: fenced, gen: 2, keys: k(0, 10, 1, 20), holders: []int{0}},
			{host: 1, cmd: "acquire", rt: we, k1: 20, want: fenced, gen: 2, keys: k(0, 10, 1, 20), holders: []int{0}},
			{host: 1, cmd: "release", rt: we, k1: 20, gen: 2, keys: k(0, 10, 1, 20), holders: []int{0}}, // not the holder: no effect
			{host: 0, cmd: "release", rt: ea, k1: 10, want: fenced, gen: 2, keys: k(0, 10, 1, 20), holders: []int{0}},
			{host: 0, cmd: "release", rt: we, k1: 10, gen: 2, keys: k(0, 10, 1, 20)},
			{host: 1, cmd: "acquire", rt: wero, k1: 20, gen: 2, keys: k(0, 10, 1, 20), holders: []int{1}},
			{host: 1, cmd: "unreg", k1: 20, gen: 3, keys: k(0, 10)}, // the holder leaving releases types 1-4
			{host: 0, cmd: "acquire", rt: wear, k1: 10, gen: 3, keys: k(0, 10), holders: []int{0}},
			{host: 1, cmd: "reg", k2: 20, gen: 4, keys: k(0, 10, 1, 20), holders: []int{0, 1}},
			{host: 1, cmd: "acquire", rt: wear, k1: 20, gen: 4, keys: k(0, 10, 1, 20), holders: []int{0, 1}},
			{host: 0, cmd: "unreg", k1: 10, gen: 5, keys: k(1, 20), holders: []int{1}}, // all-registrants: stays
			{host: 1, cmd: "clear", k1: 21, want: fenced, gen: 5, keys: k(1, 20), holders: []int{1}},
			{host: 1, cmd: "clear", k1: 20, gen: 6, keys: k()},
		},
		"preempt": {
			{host: 0, cmd: "reg", k2: 10, gen: 1, keys: k(0, 10)},
			{host: 1, cmd: "reg", k2: 20, gen: 2, keys: k(0, 10, 1, 20)},
			{host: 2, cmd: "reg", k2: 20, gen: 3, keys: k(0, 10, 1, 20, 2, 20)},
			// no reservation: preempt unregisters the key's hosts
			{host: 0, cmd: "preempt", rt: we, k1: 10, k2: 99, want: fenced, gen: 3, keys: k(0, 10, 1, 20, 2, 20)},
			{host: 0, cmd: "preempt", rt: we, k1: 10, k2: 20, gen: 4, keys: k(0, 10)},
			{host: 1, cmd: "reg", k2: 20, gen: 5, keys: k(0, 10, 1, 20)},
			{host: 0, cmd: "acquire", rt: we, k1: 10, gen: 5, keys: k(0, 10, 1, 20), holders: []int{0}},
			{host: 1, cmd: "preempt", rt: we, k1: 20, k2: 0, want: invalid, gen: 5, keys: k(0, 10, 1, 20), holders: []int{0}},
			// preempting the holder's key takes the reservation (new type)
			{host: 1, cmd: "preempt", rt: ea, k1: 20, k2: 10, gen: 6, keys: k(1, 20), holders: []int{1}},
			{host: 0, cmd: "reg", k2: 10, gen: 7, keys: k(0, 10, 1, 20), holders: []int{1}},
			{host: 2, cmd: "reg", k2: 30, gen: 8, keys: k(0, 10, 1, 20, 2, 30), holders: []int{1}},
			// a non-holder key: unregistered, the reservation stays
			{host: 1, cmd: "abort", rt: ea, k1: 20, k2: 30, gen: 9, keys: k(0, 10, 1, 20), holders: []int{1}},
			{host: 1, cmd: "preempt", rt: wear, k1: 20, k2: 20, gen: 10, keys: k(0, 10, 1, 20), holders: []int{0, 1}}, // holder changes type
			{host: 2, cmd: "reg", k2: 30, gen: 11, keys: k(0, 10, 1, 20, 2, 30), holders: []int{0, 1, 2}},
			// all-registrants with a key: only that key goes
			{host: 2, cmd: "abort", rt: wear, k1: 30, k2: 10, gen: 12, keys: k(1, 20, 2, 30), holders: []int{1, 2}},
			// all-registrants with key 0: the caller stays alone, new type
			{host: 2, cmd: "preempt", rt: we, k1: 30, k2: 0, gen: 13, keys: k(2, 30), holders: []int{2}},
		},
	}
	for name, steps := range scripts {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, 1, 1<<20, nil)
			ctx := context.Background()
			devs := []*Device{hostDev(t, f, 1), hostDev(t, f, 2), hostDev(t, f, 3)}
			for i, s := range steps {
				err := s.run(ctx, devs[s.host])
				if s.want == nil && err != nil || s.want != nil && !errors.Is(err, s.want) {
					t.Fatalf("step %d (%s by host %d): %v, want %v", i, s.cmd, s.host, err, s.want)
				}
				checkReport(t, fmt.Sprintf("after step %d (%s by host %d)", i, s.cmd, s.host), devs[0], s)
			}
		})
	}
}

func checkReport(t *testing.T, when string, d *Device, s resvStep) {
	t.Helper()
	st, err := d.Report(context.Background())
	if err != nil {
		t.Fatalf("%s: report: %v", when, err)
	}
	got := map[int]uint64{}
	holders := map[int]bool{}
	for _, r := range st.Registrants {
		host := int(r.HostID[15]) - 1
		if r.HostID != [16]byte{0: 0xA5, 15: byte(host + 1)} || r.CNTLID != 0xFFFF {
			t.Fatalf("%s: registrant %+v: unexpected host ID or controller ID", when, r)
		}
		got[host] = r.Key
		holders[host] = r.Holder
	}
	wantHolders := map[int]bool{}
	for h := range s.keys {
		wantHolders[h] = false
	}
	for _, h := range s.holders {
		wantHolders[h] = true
	}
	if st.Gen != s.gen || st.Count != len(s.keys) || fmt.Sprint(got) != fmt.Sprint(s.keys) || fmt.Sprint(holders) != fmt.Sprint(wantHolders) {
		t.Fatalf("%s: report gen %d count %d keys %v holders %v; want gen %d keys %v holders %v",
			when, st.Gen, st.Count, got, holders, s.gen, s.keys, wantHolders)
	}
	if len(s.holders) > 0 && st.Type == pdu.ResvNone || len(s.holders) == 0 && st.Type != pdu.ResvNone {
		t.Fatalf("%s: reservation type %v, want one iff holders %v", when, st.Type, s.holders)
	}
}

// TestManyRegistrants: 70 sessions registered on one namespace (more than
// one 4 KiB report holds, and enough for the target's indexed check):
// Report returns them all, every registrant may write under
// write-exclusive all-registrants, an unregistered host may not.
func TestManyRegistrants(t *testing.T) {
	const n = 70
	f := newFixture(t, 1, 1<<20, nil)
	ctx := context.Background()
	devs := make([]*Device, n)
	for i := range devs {
		devs[i] = hostDev(t, f, byte(i+1))
		if err := devs[i].TakeOver(ctx, uint64(1000+i), 0); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	st, err := devs[0].Report(ctx)
	if err != nil || st.Count != n || len(st.Registrants) != n {
		t.Fatalf("report: count %d, %d entries, %v; want %d", st.Count, len(st.Registrants), err, n)
	}
	for i, r := range st.Registrants {
		if r.Key != uint64(1000+i) || !r.Holder {
			t.Fatalf("entry %d: %+v", i, r)
		}
	}
	if err := devs[n-1].WriteAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatalf("last registrant's write: %v", err)
	}
	if err := hostDev(t, f, 200).WriteAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("unregistered host's write: %v, want ErrFenced", err)
	}
}
