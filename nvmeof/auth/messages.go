package auth

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var le = binary.LittleEndian

// Message header values: auth_type, then auth_id.
const (
	typeCommon  = 0x00
	typeDHCHAP  = 0x01
	idNegotiate = 0x00
	idChallenge = 0x01
	idReply     = 0x02
	idSuccess1  = 0x03
	idSuccess2  = 0x04
	idFailure2  = 0xF0
	idFailure1  = 0xF1
)

// Failure reasons (rescode_exp of a Failure1 or Failure2 message).
const (
	ReasonFailed       uint8 = 1
	ReasonNotUsable    uint8 = 2
	ReasonHashUnusable uint8 = 4
	ReasonDHUnusable   uint8 = 5
	ReasonBadPayload   uint8 = 6
	ReasonBadMessage   uint8 = 7
	negotiateLen             = 72
	idListLen                = 30
	protocolDHCHAP           = 0x01
	maxRandomBytes           = 64
	failureLen               = 8
	headerLen                = 16
	negotiateDescOff         = 8
	negotiateHashesOff       = 12
	negotiateGroupsOff       = 42
)

// ErrFailed is the class of every failed authentication.
var ErrFailed = errors.New("DH-HMAC-CHAP authentication failed")

// FailureError is a failed exchange: Reason is the rescode_exp; Remote
// says the peer sent the failure (else this side found it).
type FailureError struct {
	Reason uint8
	Remote bool
	Detail string
}

func (e *FailureError) Error() string {
	who := "local"
	if e.Remote {
		who = "peer"
	}
	return fmt.Sprintf("%v (%s reason %d: %s)", ErrFailed, who, e.Reason, e.Detail)
}

func (e *FailureError) Unwrap() error { return ErrFailed }

func fail(reason uint8, format string, args ...any) *FailureError {
	return &FailureError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

func header(authType, id uint8, tid uint16, n int) []byte {
	b := make([]byte, n)
	b[0], b[1] = authType, id
	le.PutUint16(b[4:], tid)
	return b
}

// failure is a Failure1 (controller) or Failure2 (host) message.
func failure(id uint8, tid uint16, reason uint8) []byte {
	b := header(typeCommon, id, tid, failureLen)
	b[6], b[7] = 0x01, reason
	return b
}

// kind says what message b is; ok false for one too short to tell.
func kind(b []byte) (authType, id uint8, tid uint16, ok bool) {
	if len(b) < failureLen {
		return 0, 0, 0, false
	}
	return b[0], b[1], le.Uint16(b[4:]), true
}

// remoteFailure reads a Failure1/2 message, nil for another message.
func remoteFailure(b []byte) *FailureError {
	t, id, _, ok := kind(b)
	if !ok || t != typeCommon || (id != idFailure1 && id != idFailure2) {
		return nil
	}
	return &FailureError{Reason: b[7], Remote: true, Detail: "failure message"}
}

type negotiate struct {
	tid      uint16
	hashes   []uint8
	dhGroups []uint8
}

func (n negotiate) marshal() []byte {
	b := header(typeCommon, idNegotiate, n.tid, negotiateLen)
	b[7] = 1 // napd
	b[negotiateDescOff] = protocolDHCHAP
	b[negotiateDescOff+2], b[negotiateDescOff+3] = byte(len(n.hashes)), byte(len(n.dhGroups))
	copy(b[negotiateHashesOff:], n.hashes)
	copy(b[negotiateGroupsOff:], n.dhGroups)
	return b
}

func parseNegotiate(b []byte) (negotiate, error) {
	if len(b) < negotiateLen || b[7] < 1 || b[negotiateDescOff] != protocolDHCHAP {
		return negotiate{}, fail(ReasonBadPayload, "negotiate of %d bytes without a DH-HMAC-CHAP descriptor", len(b))
	}
	hl, dl := int(b[negotiateDescOff+2]), int(b[negotiateDescOff+3])
	if hl > idListLen || dl > idListLen {
		return negotiate{}, fail(ReasonBadPayload, "negotiate lists %d hashes, %d groups", hl, dl)
	}
	return negotiate{tid: le.Uint16(b[4:]), hashes: b[negotiateHashesOff : negotiateHashesOff+hl],
		dhGroups: b[negotiateGroupsOff : negotiateGroupsOff+dl]}, nil
}

type challenge struct {
	tid     uint16
	hash    uint8
	dhGroup uint8
	seq     uint32
	c       []byte
	dhPub   []byte
}

func (c challenge) marshal() []byte {
	b := header(typeDHCHAP, idChallenge, c.tid, headerLen+len(c.c)+len(c.dhPub))
	b[6], b[8], b[9] = byte(len(c.c)), c.hash, c.dhGroup
	le.PutUint16(b[10:], uint16(len(c.dhPub)))
	le.PutUint32(b[12:], c.seq)
	copy(b[headerLen:], c.c)
	copy(b[headerLen+len(c.c):], c.dhPub)
	return b
}

func parseChallenge(b []byte) (challenge, error) {
	if len(b) < headerLen || b[0] != typeDHCHAP || b[1] != idChallenge {
		return challenge{}, fail(ReasonBadMessage, "not a challenge")
	}
	c := challenge{tid: le.Uint16(b[4:]), hash: b[8], dhGroup: b[9], seq: le.Uint32(b[12:])}
	hl, dl := int(b[6]), int(le.Uint16(b[10:]))
	if hl != hashLen(c.hash) || dl != dhLen(c.dhGroup) || len(b) < headerLen+hl+dl {
		return challenge{}, fail(ReasonBadPayload, "challenge hl %d dhvlen %d for hash %d group %d in %d bytes", hl, dl, c.hash, c.dhGroup, len(b))
	}
	c.c, c.dhPub = b[headerLen:headerLen+hl], b[headerLen+hl:headerLen+hl+dl]
	return c, nil
}

type reply struct {
	tid    uint16
	cvalid bool
	seq    uint32
	r, c2  []byte // c2 zeros when !cvalid; len(c2) == len(r)
	dhPub  []byte
}

func (r reply) marshal() []byte {
	hl := len(r.r)
	b := header(typeDHCHAP, idReply, r.tid, headerLen+2*hl+len(r.dhPub))
	b[6] = byte(hl)
	if r.cvalid {
		b[8] = 1
	}
	le.PutUint16(b[10:], uint16(len(r.dhPub)))
	le.PutUint32(b[12:], r.seq)
	copy(b[headerLen:], r.r)
	copy(b[headerLen+hl:], r.c2)
	copy(b[headerLen+2*hl:], r.dhPub)
	return b
}

func parseReply(b []byte, hl, dl int) (reply, error) {
	if len(b) < headerLen || b[0] != typeDHCHAP || b[1] != idReply {
		return reply{}, fail(ReasonBadMessage, "not a reply")
	}
	if int(b[6]) != hl || int(le.Uint16(b[10:])) != dl || len(b) < headerLen+2*hl+dl {
		return reply{}, fail(ReasonBadPayload, "reply hl %d dhvlen %d in %d bytes, want %d and %d", b[6], le.Uint16(b[10:]), len(b), hl, dl)
	}
	r := reply{tid: le.Uint16(b[4:]), cvalid: b[8] == 1, seq: le.Uint32(b[12:])}
	r.r, r.c2, r.dhPub = b[headerLen:headerLen+hl], b[headerLen+hl:headerLen+2*hl], b[headerLen+2*hl:headerLen+2*hl+dl]
	return r, nil
}

// success1 carries R2 when rvalid.
func success1(tid uint16, hl int, r2 []byte) []byte {
	b := header(typeDHCHAP, idSuccess1, tid, headerLen+hl)
	b[6] = byte(hl)
	if r2 != nil {
		b[8] = 1
		copy(b[headerLen:], r2)
	}
	return b
}

func success2(tid uint16) []byte { return header(typeDHCHAP, idSuccess2, tid, headerLen) }
