package target

import (
	"crypto/rand"
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/auth"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// requireAuth starts DH-HMAC-CHAP on a new queue of ct when its host has
// keys, and returns the Connect response bit that says so (or 0).
func (c *conn) requireAuth(ct *controller) uint32 {
	if ct.sub == nil {
		return 0
	}
	ks, ok := ct.sub.keys[ct.hostNQN]
	if !ok {
		return 0
	}
	c.authx = auth.NewCtrlExchange(ks, ct.hostNQN, ct.sub.cfg.NQN, rand.Reader)
	return pdu.ConnectAuthReq
}

// authCmd runs AUTH_SEND and AUTH_RECEIVE: messages travel in the command
// data; protocol failures travel as Failure1 messages, with a successful
// completion, as the specification has it.
func (c *conn) authCmd(cmd *command) {
	s := &cmd.sqe
	n := s.CDW11 // TL or AL
	switch {
	case c.authx == nil:
		cmd.fail(pdu.SCInvalidField, true) // no keys for this host
		return
	case s.CDW10&^0xFF != pdu.AuthCDW10 || n == 0 || n > pdu.AuthMaxMessage:
		cmd.fail(pdu.SCInvalidField, true)
		return
	}
	if s.FCType() == pdu.FabricsAuthSend {
		if int(n) > len(cmd.data) {
			cmd.fail(pdu.SCDataSGLLengthInvalid, true)
			return
		}
		if err := c.authx.Send(cmd.data[:n]); err != nil {
			cmd.fail(pdu.SCInternalError, false)
			return
		}
		if !c.noteAuth() {
			cmd.fail(pdu.SCConnectControllerBusy, false)
			return
		}
		cmd.ok(0)
		return
	}
	out := c.authx.Receive()
	switch {
	case out == nil:
		cmd.fail(pdu.SCCommandSequenceError, true)
		return
	case len(out) > int(n):
		cmd.fail(pdu.SCInvalidField, true)
		return
	}
	if !c.noteAuth() {
		cmd.fail(pdu.SCConnectControllerBusy, false)
		return
	}
	buf := make([]byte, n) // exactly AL bytes, zero-filled, as nvmet answers
	copy(buf, out)
	cmd.sendData(buf)
}

// noteAuth opens or closes the queue after an authentication message and
// logs the outcome once. A queue that authenticates is counted against
// its host's cap (MaxConnectionsPerHost) and loses its authentication
// deadline; false when the host is at its cap: the queue stays shut and
// its deadline closes it.
func (c *conn) noteAuth() bool {
	was := c.authed
	c.authed = c.authx.Authenticated()
	switch {
	case c.authed && !was:
		if c.slot == "" && !c.takeHostSlot(c.ctrl.hostNQN) {
			c.authed = false
			return false
		}
		c.nc.SetReadDeadline(time.Time{})
		c.handshakeDone()
		c.t.logf("nvmeof/target: %s: host %s authenticated (DH-HMAC-CHAP)", c, c.ctrl.hostNQN)
	case !c.authed && c.authx.Err() != nil && c.authx.Err() != c.authErr:
		c.authErr = c.authx.Err()
		c.t.refuse(RefusedAuth)
		c.t.logf("nvmeof/target: %s: host %s refused: %v", c, c.ctrl.hostNQN, c.authErr)
	}
	return true
}

// keyed says whether host hostNQN must authenticate to subsystem subNQN.
func (t *Target) keyed(subNQN, hostNQN string) bool {
	s := t.subs[subNQN]
	if s == nil {
		return false
	}
	_, ok := s.keys[hostNQN]
	return ok
}
