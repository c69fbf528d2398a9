package initiator

import (
	"errors"
	"fmt"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// StatusError is an NVMe completion with a nonzero status. It is always
// returned marked with a blockdev error class.
type StatusError struct {
	// Op names the command ("read", "write", "identify", ...).
	Op string
	// Status is SCT<<8 | SC.
	Status pdu.StatusCode
	// DNR is the Do Not Retry bit.
	DNR bool
}

func (e *StatusError) Error() string {
	dnr := ""
	if e.DNR {
		dnr = ", DNR"
	}
	return fmt.Sprintf("nvme %s: status 0x%03x (%s%s)", e.Op, uint16(e.Status), e.Status, dnr)
}

// statusErr turns a nonzero wire status (the CQE's status field, phase bit
// included) into a classed error.
func statusErr(op string, st pdu.Status) error {
	e := &StatusError{Op: op, Status: st.Code(), DNR: st.DNR()}
	return blockdev.Mark(e, statusClass(e.Status))
}

// statusClass maps a status to the blockdev class a caller sees. Capacity
// Exceeded is a thin namespace whose backing store is full: ErrNoSpace, not
// a range error and not a path error (the namespace still serves reads).
func statusClass(s pdu.StatusCode) error {
	switch s {
	case pdu.SCLBAOutOfRange:
		return blockdev.ErrOutOfRange
	case pdu.SCCapacityExceeded:
		return blockdev.ErrNoSpace
	case pdu.SCInvalidOpcode, pdu.SCInvalidField, pdu.SCInvalidNamespace, pdu.SCDataSGLLengthInvalid,
		pdu.SCSGLTypeInvalid, pdu.SCSGLOffsetInvalid, pdu.SCInvalidSGLSegment:
		return blockdev.ErrInvalid
	case pdu.SCNamespaceWriteProtect, pdu.SCReservationConflict:
		return blockdev.ErrFenced
	case pdu.SCUnrecoveredReadError, 0x282, 0x283, 0x284:
		return blockdev.ErrCorrupt
	}
	return blockdev.ErrUnavailable
}

// isPathStatus reports whether a status means "this path cannot serve the
// command now, another may": every path-related status (SCT 3), namespace
// not ready, transient transport errors, aborts from a dying queue, and a
// command sequence error on an I/O queue (the controller behind it is gone,
// for example after a keep-alive expiry; the path is reconnected).
func isPathStatus(s pdu.StatusCode) bool {
	if s.IsPathError() {
		return true
	}
	switch s {
	case pdu.SCNamespaceNotReady, pdu.SCTransientTransport, pdu.SCAbortSQDeleted, pdu.SCDataTransferError,
		pdu.SCCommandSequenceError:
		return true
	}
	return false
}

// errTransport marks errors of the connection itself (closed, reset,
// protocol violation, timeout): the command may be retried on another path.
var errTransport = errors.New("nvme/tcp transport error")

// isRetryable reports whether err should make the multipath layer try the
// command again on another (or a reconnected) path.
func isRetryable(err error) bool {
	if errors.Is(err, errTransport) {
		return true
	}
	var se *StatusError
	return errors.As(err, &se) && isPathStatus(se.Status)
}
