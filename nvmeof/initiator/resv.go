package initiator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// Reservations. Registrations belong to the host ID the device sends at
// Connect (Options.HostID): devices opened with distinct host IDs are
// distinct registrants even on one node, and all paths of one device are
// the same registrant. A reservation conflict is a *StatusError marked
// blockdev.ErrFenced and is never retried, on this path or another (it is
// not a path error).

var _ blockdev.Reserver = (*Device)(nil)

// CanReserve reports whether the controller supports the reservation
// commands (Identify Controller ONCS bit 5): a namespace behind one that
// does not (Linux nvmet before 6.13, many appliances) cannot fence a stale
// writer.
func (d *Device) CanReserve() bool { return d.caps.reservations }

// RegisterAction is the action of Reservation Register.
type RegisterAction uint8

// Register actions.
const (
	RegisterKey   = RegisterAction(pdu.ResvRegisterActionRegister)
	UnregisterKey = RegisterAction(pdu.ResvRegisterActionUnregister)
	ReplaceKey    = RegisterAction(pdu.ResvRegisterActionReplace)
)

// AcquireAction is the action of Reservation Acquire.
type AcquireAction uint8

// Acquire actions.
const (
	AcquireOnly     = AcquireAction(pdu.ResvAcquireActionAcquire)
	Preempt         = AcquireAction(pdu.ResvAcquireActionPreempt)
	PreemptAndAbort = AcquireAction(pdu.ResvAcquireActionPreemptAbrt)
)

// ReleaseAction is the action of Reservation Release.
type ReleaseAction uint8

// Release actions.
const (
	ReleaseReservation = ReleaseAction(pdu.ResvReleaseActionRelease)
	ClearReservations  = ReleaseAction(pdu.ResvReleaseActionClear)
)

// resvReportLen is the first report buffer: the header and 63
// registrants; a larger one follows when more are registered.
const resvReportLen = 4096

// Register runs Reservation Register: register nrkey, unregister
// (crkey must match unless ignoreKey), or replace crkey by nrkey. It asks
// the target to persist through power loss (CPTPL 11b) as the Linux host
// does.
func (d *Device) Register(ctx context.Context, a RegisterAction, crkey, nrkey uint64, ignoreKey bool) error {
	c := pdu.ResvCmd{Action: uint8(a), IEKey: ignoreKey, CPTPL: 3}
	return d.resvCmd(ctx, "reservation register", pdu.IOResvRegister, c, crkey, nrkey)
}

// Acquire runs Reservation Acquire with the device's registered key crkey:
// acquire a reservation of type t, or preempt (and abort) the registrants
// with key prkey.
func (d *Device) Acquire(ctx context.Context, a AcquireAction, t pdu.ResvType, crkey, prkey uint64) error {
	c := pdu.ResvCmd{Action: uint8(a), Type: t}
	return d.resvCmd(ctx, "reservation acquire", pdu.IOResvAcquire, c, crkey, prkey)
}

// Release runs Reservation Release: release the type-t reservation this
// host holds, or clear every registration and the reservation.
func (d *Device) Release(ctx context.Context, a ReleaseAction, t pdu.ResvType, crkey uint64) error {
	c := pdu.ResvCmd{Action: uint8(a), Type: t}
	return d.resvCmd(ctx, "reservation release", pdu.IOResvRelease, c, crkey, 0)
}

func (d *Device) resvCmd(ctx context.Context, op string, opcode uint8, c pdu.ResvCmd, k1, k2 uint64) error {
	if d.isClosed() {
		return blockdev.Mark(errClosed, blockdev.ErrUnavailable)
	}
	data := pdu.AppendResvKeys(make([]byte, 0, pdu.ResvKeysLen), k1, k2)
	r := request{op: op, sqe: pdu.SQE{Opcode: opcode, Flags: pdu.PSDTSGL, NSID: d.opts.NSID, CDW10: c.CDW10(),
		SGL: pdu.SGL{ID: pdu.SGLTransport, Length: pdu.ResvKeysLen}}, data: data, dir: dirH2C}
	_, err := d.exec(ctx, &r, kindOther)
	return err
}

// Report runs Reservation Report with the extended data structure and
// returns the generation, the reservation and the registrants (as many
// as fit in the controller's largest transfer; Count says how many there
// are).
func (d *Device) Report(ctx context.Context) (pdu.ResvStatus, error) {
	st, err := d.report(ctx, resvReportLen)
	if err == nil && st.Count > len(st.Registrants) && d.maxXfr > resvReportLen {
		n := pdu.ResvReportHeaderLen + st.Count*pdu.ResvReportEntryLen
		st, err = d.report(ctx, min(n, d.maxXfr))
	}
	return st, err
}

func (d *Device) report(ctx context.Context, n int) (pdu.ResvStatus, error) {
	if d.isClosed() {
		return pdu.ResvStatus{}, blockdev.Mark(errClosed, blockdev.ErrUnavailable)
	}
	buf := make([]byte, n)
	r := request{op: "reservation report", sqe: pdu.SQE{Opcode: pdu.IOResvReport, Flags: pdu.PSDTSGL,
		NSID: d.opts.NSID, CDW10: uint32(n/4 - 1), CDW11: pdu.ResvReportEDS,
		SGL: pdu.SGL{ID: pdu.SGLTransport, Length: uint32(n)}}, data: buf, dir: dirC2H}
	if _, err := d.exec(ctx, &r, kindOther); err != nil {
		return pdu.ResvStatus{}, err
	}
	st, err := pdu.ParseResvStatusExt(buf)
	if err != nil {
		return st, blockdev.Mark(fmt.Errorf("nvme/tcp reservation report: %w", err), blockdev.ErrUnavailable)
	}
	return st, nil
}

// TakeOver (blockdev.Reserver) makes this device's host a writer
// registered with key and fences the registrants of stale (0: none): it
// registers key (a no-op when already registered with it; a conflict when
// registered with another key), acquires a write-exclusive
// all-registrants reservation unless one is held, and preempts-and-aborts
// stale. When it returns nil the target has finished or aborted every
// command of stale's hosts on the namespace and refuses their writes.
//
// A preempt that fails with a conflict after a retry on another path
// may have succeeded the first time: the report decides.
func (d *Device) TakeOver(ctx context.Context, key, stale uint64) error {
	if key == 0 || key == stale {
		return blockdev.Mark(fmt.Errorf("nvme/tcp take over: key %d / stale %d: need a nonzero key other than stale", key, stale),
			blockdev.ErrInvalid)
	}
	if err := d.Register(ctx, RegisterKey, 0, key, false); err != nil {
		return err
	}
	err := d.Acquire(ctx, AcquireOnly, pdu.ResvWriteExclusiveAllRegs, key, 0)
	if err != nil {
		return err
	}
	if stale == 0 {
		return nil
	}
	err = d.Acquire(ctx, PreemptAndAbort, pdu.ResvWriteExclusiveAllRegs, key, stale)
	if !errors.Is(err, blockdev.ErrFenced) {
		return err
	}
	st, rerr := d.Report(ctx)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	if hasKey(st, stale) || !hasKey(st, key) || st.Type != pdu.ResvWriteExclusiveAllRegs {
		return err
	}
	return nil // the stale key is already gone and ours holds the reservation
}

// Leave unregisters key; ErrFenced when it was fenced (or when a retry
// follows a first attempt that succeeded). See blockdev.Reserver on why a
// clean unmap should not call it.
func (d *Device) Leave(ctx context.Context, key uint64) error {
	return d.Register(ctx, UnregisterKey, key, 0, false)
}

func hasKey(st pdu.ResvStatus, k uint64) bool {
	for _, r := range st.Registrants {
		if r.Key == k {
			return true
		}
	}
	return false
}

// SessionHostID is the host ID of an ownership session: the volume's tag
// in bytes 0-7 and the session's epoch (big-endian) in bytes 8-15. Claim
// recognises the sessions of one volume by the tag.
func SessionHostID(tag [8]byte, epoch uint64) [16]byte {
	var id [16]byte
	copy(id[:8], tag[:])
	binary.BigEndian.PutUint64(id[8:], epoch)
	return id
}

// maxClaimRounds bounds Claim's report-and-preempt rounds (each round
// removes every older session it saw; new ones only appear when stale
// owners keep registering).
const maxClaimRounds = 8

// Claim makes this device's session (host ID from SessionHostID) the
// writer of its volume on the namespace, with key epoch: it registers,
// makes sure a write-exclusive all-registrants reservation is held, then
// reads the registrants and preempts-and-aborts every session of the same
// volume with a lower epoch, until none is left. If it finds a session of
// the volume with a higher epoch, this session is stale: it unregisters
// and fails with ErrFenced. Registrants of other volumes are untouched.
//
// Registering before looking makes two racing sessions safe: whichever
// reads second sees the other, so the stale one never keeps a
// registration it could write through unnoticed.
func (d *Device) Claim(ctx context.Context, epoch uint64) error {
	if err := d.TakeOver(ctx, epoch, 0); err != nil {
		return err
	}
	tag := [8]byte(d.opts.HostID[:8])
	for range maxClaimRounds {
		st, err := d.Report(ctx)
		if err != nil {
			return err
		}
		older, newer := sessions(st, tag, epoch)
		if newer != 0 {
			err := blockdev.Mark(fmt.Errorf("nvme/tcp claim epoch %d: the volume has a newer session (epoch %d)", epoch, newer),
				blockdev.ErrFenced)
			return errors.Join(err, d.Leave(ctx, epoch))
		}
		if len(older) == 0 {
			return nil
		}
		for _, k := range older {
			err := d.Acquire(ctx, PreemptAndAbort, pdu.ResvWriteExclusiveAllRegs, epoch, k)
			if err != nil && !errors.Is(err, blockdev.ErrFenced) {
				return err // a conflict: gone meanwhile, or we were; the next report says
			}
		}
	}
	return blockdev.Mark(fmt.Errorf("nvme/tcp claim epoch %d: older sessions keep registering", epoch), blockdev.ErrUnavailable)
}

// sessions returns the keys of the volume's other sessions below epoch,
// and the highest epoch above it (0: none).
func sessions(st pdu.ResvStatus, tag [8]byte, epoch uint64) (older []uint64, newer uint64) {
	for _, r := range st.Registrants {
		if [8]byte(r.HostID[:8]) != tag || r.Key == epoch {
			continue
		}
		if r.Key < epoch {
			older = append(older, r.Key)
		} else {
			newer = max(newer, r.Key)
		}
	}
	return older, newer
}
