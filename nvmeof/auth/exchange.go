package auth

import (
	"crypto/subtle"
	"io"
	"math/big"
	"slices"
)

// Keys are one host's DH-HMAC-CHAP configuration on either side.
type Keys struct {
	// Secret is the host's secret (required).
	Secret Secret
	// CtrlSecret, when not nil, is the controller's: the host then checks
	// the controller too (bidirectional).
	CtrlSecret *Secret
	// Hashes and DHGroups: offered by a host, accepted by a controller
	// in order of preference. Default AllHashes, AllDHGroups.
	Hashes, DHGroups []uint8
}

// hashes and dhGroups are the configured lists without unknown IDs.
func (k *Keys) hashes() []uint8 {
	if len(k.Hashes) == 0 {
		return AllHashes
	}
	return known(k.Hashes, AllHashes)
}

func (k *Keys) dhGroups() []uint8 {
	if len(k.DHGroups) == 0 {
		return AllDHGroups
	}
	return known(k.DHGroups, AllDHGroups)
}

func known(ids, all []uint8) []uint8 {
	var out []uint8
	for _, id := range ids {
		if slices.Contains(all, id) {
			out = append(out, id)
		}
	}
	return out
}

func randomBytes(rand io.Reader, n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(rand, b)
	return b, err
}

// HostExchange is the host side of one authentication of one queue:
// Negotiate, then OnChallenge with the controller's answer, then
// OnSuccess1 with its next one.
type HostExchange struct {
	keys              Keys
	hostNQN, subNQN   string
	rand              io.Reader
	tid               uint16
	hash              uint8
	seq2              uint32
	ca2               []byte // augmented C2 (bidirectional)
	expectedChallenge bool
}

// NewHostExchange starts an exchange with transaction ID tid.
func NewHostExchange(keys Keys, hostNQN, subNQN string, tid uint16, rand io.Reader) *HostExchange {
	return &HostExchange{keys: keys, hostNQN: hostNQN, subNQN: subNQN, rand: rand, tid: tid}
}

// Negotiate is the first message (AUTH_SEND).
func (x *HostExchange) Negotiate() []byte {
	x.expectedChallenge = true
	return negotiate{tid: x.tid, hashes: x.keys.hashes(), dhGroups: x.keys.dhGroups()}.marshal()
}

// OnChallenge answers the controller's Challenge with a Reply. On error
// the returned message, if not nil, is a Failure2 to send before giving
// up.
func (x *HostExchange) OnChallenge(msg []byte) ([]byte, error) {
	if f := remoteFailure(msg); f != nil {
		return nil, f
	}
	c, err := parseChallenge(msg)
	if err == nil && c.tid != x.tid {
		err = fail(ReasonBadMessage, "challenge for transaction %d, want %d", c.tid, x.tid)
	}
	if err == nil && !slices.Contains(x.keys.hashes(), c.hash) {
		err = fail(ReasonHashUnusable, "controller chose hash %d, not offered", c.hash)
	}
	if err == nil && !slices.Contains(x.keys.dhGroups(), c.dhGroup) {
		err = fail(ReasonDHUnusable, "controller chose DH group %d, not offered", c.dhGroup)
	}
	if err != nil {
		return x.failure2(err), err
	}
	x.hash = c.hash
	var z, pub []byte
	if c.dhGroup != DHNull {
		var priv *big.Int
		if priv, pub, err = dhKeyPair(x.rand, c.dhGroup); err == nil {
			z, err = dhShared(c.dhGroup, priv, c.dhPub)
		}
		if err != nil {
			err = fail(ReasonBadPayload, "%v", err)
			return x.failure2(err), err
		}
	}
	hl := len(c.c)
	r := reply{tid: x.tid, seq: 0, dhPub: pub, c2: make([]byte, hl),
		r: HostResponse(c.hash, x.keys.Secret.Transform(x.hostNQN), augment(c.hash, c.c, z), c.seq, x.tid, x.hostNQN, x.subNQN)}
	if x.keys.CtrlSecret != nil {
		if r.c2, err = randomBytes(x.rand, hl); err == nil {
			r.seq, err = nonzeroSeq(x.rand)
		}
		if err != nil {
			return nil, err
		}
		r.cvalid, x.seq2, x.ca2 = true, r.seq, augment(c.hash, r.c2, z)
	}
	return r.marshal(), nil
}

// OnSuccess1 checks the controller's Success1 (and R2 when
// bidirectional). It returns the Success2 to send (bidirectional), or on
// error a Failure2 to send (or nil).
func (x *HostExchange) OnSuccess1(msg []byte) ([]byte, error) {
	if f := remoteFailure(msg); f != nil {
		return nil, f
	}
	hl := hashLen(x.hash)
	t, id, tid, _ := kind(msg)
	if t != typeDHCHAP || id != idSuccess1 || len(msg) < headerLen+hl || int(msg[6]) != hl || tid != x.tid {
		err := fail(ReasonBadMessage, "want Success1 for transaction %d", x.tid)
		return x.failure2(err), err
	}
	if x.keys.CtrlSecret == nil {
		return nil, nil
	}
	want := ControllerResponse(x.hash, x.keys.CtrlSecret.Transform(x.subNQN), x.ca2, x.seq2, x.tid, x.subNQN, x.hostNQN)
	if msg[8] != 1 || subtle.ConstantTimeCompare(msg[headerLen:headerLen+hl], want) != 1 {
		err := fail(ReasonFailed, "controller response R2 does not match: wrong controller secret")
		return x.failure2(err), err
	}
	return success2(x.tid), nil
}

func (x *HostExchange) failure2(err error) []byte {
	f, _ := err.(*FailureError)
	if f == nil {
		return nil
	}
	return failure(idFailure2, x.tid, f.Reason)
}

// ctrlState is where a CtrlExchange is.
type ctrlState uint8

const (
	ctrlIdle          ctrlState = iota // waiting for Negotiate
	ctrlChallenge                      // Challenge (or Failure1) to be read
	ctrlAwaitReply                     // waiting for Reply
	ctrlSuccess1                       // Success1 (or Failure1) to be read
	ctrlAwaitSuccess2                  // waiting for Success2
	ctrlDone                           // authenticated
	ctrlFailed                         // Failure1 read or Failure2 received
)

// CtrlExchange is the controller side of a queue's authentication: Send
// takes what the host sent with AUTH_SEND, Receive gives what AUTH_RECEIVE
// returns. Authenticated turns true when the host has read a successful
// Success1 (unidirectional) or sent Success2 (bidirectional). A new
// Negotiate starts over (re-authentication).
type CtrlExchange struct {
	keys            Keys
	hostNQN, subNQN string
	rand            io.Reader
	state           ctrlState
	out             []byte // next AUTH_RECEIVE answer
	bidi            bool
	ok              bool
	err             *FailureError // why it failed, once failed

	tid     uint16
	hash    uint8
	dhGroup uint8
	priv    *big.Int
	seq     uint32
	c1      []byte
}

// NewCtrlExchange is a queue's exchange for a host with keys.
func NewCtrlExchange(keys Keys, hostNQN, subNQN string, rand io.Reader) *CtrlExchange {
	return &CtrlExchange{keys: keys, hostNQN: hostNQN, subNQN: subNQN, rand: rand}
}

// Authenticated says whether the queue may carry commands.
func (x *CtrlExchange) Authenticated() bool { return x.ok }

// Err is why the last exchange failed (nil if it did not).
func (x *CtrlExchange) Err() error {
	if x.err == nil {
		return nil
	}
	return x.err
}

// Send takes an AUTH_SEND message. Protocol errors are answered with a
// Failure1 at the next Receive; an error returned means nothing can be
// answered (randomness failed).
func (x *CtrlExchange) Send(msg []byte) error {
	t, id, _, ok := kind(msg)
	switch {
	case ok && t == typeCommon && id == idNegotiate:
		return x.onNegotiate(msg)
	case ok && t == typeCommon && id == idFailure2:
		x.failed(fail(msg[7], "host sent Failure2"), false)
	case x.state == ctrlAwaitReply && ok && t == typeDHCHAP && id == idReply:
		x.onReply(msg)
	case x.state == ctrlAwaitSuccess2 && ok && t == typeDHCHAP && id == idSuccess2 && le.Uint16(msg[4:]) == x.tid:
		x.state, x.ok = ctrlDone, true
	default:
		x.failed(fail(ReasonBadMessage, "unexpected message type %#x id %#x in state %d", t, id, x.state), true)
	}
	return nil
}

// Receive is the AUTH_RECEIVE answer, nil when none is due (a command
// sequence error).
func (x *CtrlExchange) Receive() []byte {
	out := x.out
	x.out = nil
	switch {
	case out == nil:
	case x.state == ctrlChallenge:
		x.state = ctrlAwaitReply
	case x.state == ctrlSuccess1 && x.bidi:
		x.state = ctrlAwaitSuccess2
	case x.state == ctrlSuccess1:
		x.state, x.ok = ctrlDone, true
	}
	return out
}

// failed ends the exchange; with answer the host reads a Failure1 next.
func (x *CtrlExchange) failed(err *FailureError, answer bool) {
	x.state, x.ok, x.err, x.out = ctrlFailed, false, err, nil
	if answer {
		x.out = failure(idFailure1, x.tid, err.Reason)
	}
}

func (x *CtrlExchange) onNegotiate(msg []byte) error {
	*x = CtrlExchange{keys: x.keys, hostNQN: x.hostNQN, subNQN: x.subNQN, rand: x.rand}
	n, err := parseNegotiate(msg)
	x.tid = le.Uint16(msg[4:])
	if err != nil {
		x.failed(err.(*FailureError), true)
		return nil
	}
	var hashOK, dhOK bool
	x.hash, hashOK = pick(x.keys.hashes(), n.hashes)
	x.dhGroup, dhOK = pick(x.keys.dhGroups(), n.dhGroups)
	switch {
	case !hashOK:
		x.failed(fail(ReasonHashUnusable, "no acceptable hash among %v", n.hashes), true)
		return nil
	case !dhOK:
		x.failed(fail(ReasonDHUnusable, "no acceptable DH group among %v", n.dhGroups), true)
		return nil
	}
	if x.c1, err = randomBytes(x.rand, hashLen(x.hash)); err != nil {
		return err
	}
	if x.seq, err = nonzeroSeq(x.rand); err != nil {
		return err
	}
	var pub []byte
	if x.dhGroup != DHNull {
		if x.priv, pub, err = dhKeyPair(x.rand, x.dhGroup); err != nil {
			return err
		}
	}
	x.out = challenge{tid: x.tid, hash: x.hash, dhGroup: x.dhGroup, seq: x.seq, c: x.c1, dhPub: pub}.marshal()
	x.state = ctrlChallenge
	return nil
}

// pick is the first of ours that theirs lists.
func pick(ours, theirs []uint8) (uint8, bool) {
	for _, v := range ours {
		if slices.Contains(theirs, v) {
			return v, true
		}
	}
	return 0, false
}

func (x *CtrlExchange) onReply(msg []byte) {
	hl := hashLen(x.hash)
	r, err := parseReply(msg, hl, dhLen(x.dhGroup))
	if err == nil && r.tid != x.tid {
		err = fail(ReasonBadMessage, "reply for transaction %d, want %d", r.tid, x.tid)
	}
	var z []byte
	if err == nil && x.dhGroup != DHNull {
		if z, err = dhShared(x.dhGroup, x.priv, r.dhPub); err != nil {
			err = fail(ReasonBadPayload, "%v", err)
		}
	}
	if err != nil {
		x.failed(err.(*FailureError), true)
		return
	}
	want := HostResponse(x.hash, x.keys.Secret.Transform(x.hostNQN), augment(x.hash, x.c1, z), x.seq, x.tid, x.hostNQN, x.subNQN)
	if subtle.ConstantTimeCompare(r.r, want) != 1 {
		x.failed(fail(ReasonFailed, "host response R1 does not match: wrong host secret"), true)
		return
	}
	var r2 []byte
	if r.cvalid {
		if x.keys.CtrlSecret == nil {
			x.failed(fail(ReasonFailed, "host asks for bidirectional authentication; no controller secret configured"), true)
			return
		}
		r2 = ControllerResponse(x.hash, x.keys.CtrlSecret.Transform(x.subNQN), augment(x.hash, r.c2, z), r.seq, x.tid, x.subNQN, x.hostNQN)
	}
	x.bidi = r.cvalid
	x.out = success1(x.tid, hl, r2)
	x.state = ctrlSuccess1
}
