package initiator

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/auth"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// ErrAuth marks a refused in-band authentication (also class
// blockdev.ErrInvalid: retrying with the same keys does not help).
var ErrAuth = errors.New("in-band authentication")

// authKeys parses the DH-HMAC-CHAP secrets; nil when none are set.
func (o *Options) authKeys() (ks *auth.Keys, err error) {
	if o.DHCHAPSecret == "" {
		if o.DHCHAPCtrlSecret != "" {
			return nil, errors.New("DHCHAPCtrlSecret needs DHCHAPSecret")
		}
		return nil, nil
	}
	ks = &auth.Keys{}
	if ks.Secret, err = auth.ParseSecret(o.DHCHAPSecret); err != nil {
		return nil, fmt.Errorf("DHCHAPSecret: %w", err)
	}
	if o.DHCHAPCtrlSecret != "" {
		cs, err := auth.ParseSecret(o.DHCHAPCtrlSecret)
		if err != nil {
			return nil, fmt.Errorf("DHCHAPCtrlSecret: %w", err)
		}
		ks.CtrlSecret = &cs
	}
	return ks, nil
}

// transactions numbers authentication exchanges (T_ID).
var transactions atomic.Uint32

// authenticate runs DH-HMAC-CHAP on queue q after a Connect that asked
// for it: Negotiate, Challenge, Reply, Success1 and, bidirectional,
// Success2.
func (c *controller) authenticate(ctx context.Context, q *queue, qid uint16, nqn string) error {
	ks, _ := c.o.authKeys() // validated with the options
	if ks == nil {
		return blockdev.Mark(fmt.Errorf("connect qid %d: subsystem %s requires %w (DH-HMAC-CHAP) from host %s and no secret "+
			"is set: pass this host's secret with --dhchap-secret-file (the one the target's --host-keys file gives %s)",
			qid, nqn, ErrAuth, c.o.HostNQN, c.o.HostNQN), blockdev.ErrInvalid)
	}
	x := auth.NewHostExchange(*ks, c.o.HostNQN, nqn, uint16(transactions.Add(1)), rand.Reader)
	if err := c.authSend(ctx, q, x.Negotiate()); err != nil {
		return err
	}
	msg, err := c.authRecv(ctx, q)
	if err != nil {
		return err
	}
	reply, aerr := x.OnChallenge(msg)
	if reply != nil {
		if err := c.authSend(ctx, q, reply); err != nil {
			return err
		}
	}
	if aerr == nil {
		if msg, err = c.authRecv(ctx, q); err != nil {
			return err
		}
		var s2 []byte
		if s2, aerr = x.OnSuccess1(msg); s2 != nil {
			if err := c.authSend(ctx, q, s2); err != nil {
				return err
			}
		}
	}
	if aerr != nil {
		return blockdev.Mark(fmt.Errorf("connect qid %d to %s as %s: %w: %w; check that --dhchap-secret-file holds the "+
			"secret the target's --host-keys file gives %s (and --dhchap-ctrl-secret-file its controller secret, if it has one)",
			qid, nqn, c.o.HostNQN, ErrAuth, aerr, c.o.HostNQN), blockdev.ErrInvalid)
	}
	return nil
}

func (c *controller) authSend(ctx context.Context, q *queue, msg []byte) error {
	r := &request{op: "auth send", sqe: pdu.AuthSendSQE(0, uint32(len(msg))), data: msg, dir: dirH2C, inCapsule: true}
	_, err := q.do(ctx, r)
	return err
}

func (c *controller) authRecv(ctx context.Context, q *queue) ([]byte, error) {
	buf := make([]byte, pdu.AuthMaxMessage)
	r := &request{op: "auth receive", sqe: pdu.AuthRecvSQE(0, uint32(len(buf))), data: buf, dir: dirC2H}
	_, err := q.do(ctx, r)
	return buf, err
}
