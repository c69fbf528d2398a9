package initiator

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// ConnectError is a Connect command the target refused: it names the
// address, subsystem NQN and host NQN tried, says what the status means and
// what to do. The StatusError stays reachable with errors.As.
type ConnectError struct {
	Addr, SubNQN, HostNQN string
	QID                   uint16
	// DW0 is the completion's dword 0: for Invalid Parameters, the offset
	// of the bad field (bits 15:0) and whether it lies in the Connect data
	// (bit 16) rather than the command.
	DW0 uint32
	Err error // the StatusError, marked with its blockdev class
}

func (e *ConnectError) Error() string {
	var se *StatusError
	if !errors.As(e.Err, &se) {
		return fmt.Sprintf("%s refused host %s for subsystem %s: %v", e.Addr, e.HostNQN, e.SubNQN, e.Err)
	}
	return fmt.Sprintf("%s (status 0x%03x, %s)", connectAdvice(e, se.Status), uint16(se.Status), se.Status)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// connectAdvice is the sentence for a refused Connect: what was tried,
// what the status means, and what to do.
func connectAdvice(e *ConnectError, st pdu.StatusCode) string {
	tried := fmt.Sprintf("%s refused host %s for subsystem %s", e.Addr, e.HostNQN, e.SubNQN)
	allow := fmt.Sprintf("allow it on the target (`nvstripe target serve --allow-host %s`, or for a kernel nvmet target "+
		"add it to the subsystem's allowed_hosts with nvmetcli), or connect as a host it allows "+
		"(--host-nqn, NVSTRIPE_HOST_NQN or /etc/nvme/hostnqn)", e.HostNQN)
	switch st {
	case pdu.SCConnectInvalidHost:
		return fmt.Sprintf("%s: the host is not allowed into that subsystem; %s", tried, allow)
	case pdu.SCConnectInvalidParam:
		return tried + ": " + invalidParamAdvice(e, allow)
	case pdu.SCConnectControllerBusy:
		return fmt.Sprintf("%s: the target has no controller or queue to spare for this host (its connection limit, "+
			"`target serve --max-connections`, is reached, or the target is shutting down); retry later, "+
			"or close this host's other connections to it", tried)
	case pdu.SCConnectRestartDisc:
		return fmt.Sprintf("%s: the target's configuration changed; look the subsystem up again "+
			"(`nvstripe ns discover tcp://%s --host HOST`) and connect to the address it lists", tried, e.Addr)
	case pdu.SCConnectIncompatFormat:
		return fmt.Sprintf("%s: the target does not support this Connect format (an NVMe-oF target older "+
			"than revision 1.0?)", tried)
	case pdu.SCAuthRequired:
		return fmt.Sprintf("%s: the subsystem requires DH-HMAC-CHAP authentication; pass this host's secret "+
			"with --dhchap-secret-file", tried)
	case pdu.SCInvalidQueueID, pdu.SCInvalidQueueSize:
		return fmt.Sprintf("%s: the target refused I/O queue %d (queue type or size it does not support); "+
			"lower the queue depth or count", tried, e.QID)
	}
	return fmt.Sprintf("%s: the target refused the Connect command", tried)
}

// invalidParamAdvice says which Connect field a target found invalid, from
// the offset it reported.
func invalidParamAdvice(e *ConnectError, allow string) string {
	inData, off := e.DW0&(1<<16) != 0, uint16(e.DW0)
	switch {
	case inData && off == pdu.ConnectOffSubNQN:
		return fmt.Sprintf("the target has no subsystem %s; list the ones it serves with "+
			"`nvstripe ns discover tcp://%s --host HOST` and check the NQN", e.SubNQN, e.Addr)
	case inData && off == pdu.ConnectOffHostNQN:
		return fmt.Sprintf("the target does not accept host NQN %s; %s", e.HostNQN, allow)
	case inData && off == pdu.ConnectOffCNTLID:
		return "the target refused the controller ID asked for (a stale association?); retry the connection"
	case !inData && off == sqeOffSQSize:
		return fmt.Sprintf("the target refused queue %d's size; lower the queue depth", e.QID)
	}
	where := "command"
	if inData {
		where = "data"
	}
	return fmt.Sprintf("the target found a Connect parameter invalid (offset %d in the %s); most often the subsystem "+
		"NQN is unknown there (check it with `nvstripe ns discover tcp://%s --host HOST`) or the host is not allowed (%s)",
		off, where, e.Addr, allow)
}

// sqeOffSQSize is the byte offset of SQSIZE in a Connect command (the
// offset a target reports when it refuses the queue size).
const sqeOffSQSize = 44

// connectErr wraps a failed Connect: a status becomes a ConnectError of the
// same blockdev class; any other error is returned as it is.
func connectErr(err error, addr, subNQN, hostNQN string, qid uint16, dw0 uint32) error {
	var se *StatusError
	if !errors.As(err, &se) {
		return err
	}
	ce := &ConnectError{Addr: addr, SubNQN: subNQN, HostNQN: hostNQN, QID: qid, DW0: dw0, Err: err}
	return blockdev.Mark(ce, statusClass(se.Status))
}

// NotNVMeError is a peer that accepted the TCP connection but did not
// answer the NVMe/TCP handshake as a target does (it closed the connection,
// or sent HTTP, TLS or other bytes instead of ICResp).
type NotNVMeError struct {
	Addr string
	Err  error
}

func (e *NotNVMeError) Error() string {
	return fmt.Sprintf("%s did not answer as an NVMe/TCP target (is this the NVMe port? the default is 4420; "+
		"does the target require TLS? then give this host its key with --tls-key-file): %v", e.Addr, e.Err)
}

// Unwrap also yields the transport error class: the multipath layer may try
// another path.
func (e *NotNVMeError) Unwrap() []error { return []error{e.Err, errTransport} }

// notNVMe says whether an error reading ICResp means the peer is not an
// NVMe/TCP target: the connection closed or was reset before a full
// ICResp, what came was not one, or nothing came before the connect
// deadline (a target answers ICReq at once; an HTTP server waits for a
// line that never comes).
func notNVMe(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pdu.ErrProtocol) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, os.ErrDeadlineExceeded)
}
