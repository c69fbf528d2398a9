package target

import (
	"crypto/rand"
	"testing"

	"github.com/nvstripe/nvstripe/nvmeof/auth"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// authFixture serves testNQN to testHost only with DH-HMAC-CHAP; mods
// change the configuration further.
func authFixture(t *testing.T, mods ...func(*Config)) (*fixture, auth.Secret) {
	s, err := auth.GenerateSecret(rand.Reader, auth.HashSHA256, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 1, func(c *Config) {
		c.Subsystems[0].AllowedHosts = nil
		c.Subsystems[0].HostKeys = []HostKey{{HostNQN: testHost, Secret: s.String(), DHGroups: []string{"ffdhe2048"}}}
		for _, mod := range mods {
			mod(c)
		}
	})
	return f, s
}

func (h *host) authSend(msg []byte) pdu.CQE {
	return h.do(pdu.AuthSendSQE(0, uint32(len(msg))), msg, nil)
}

func (h *host) authRecv() ([]byte, pdu.CQE) {
	in := make([]byte, pdu.AuthMaxMessage)
	return in, h.do(pdu.AuthRecvSQE(0, uint32(len(in))), nil, in)
}

// authenticate runs the exchange by hand; it reports whether the
// controller answered Success1.
func (h *host) authenticate(s auth.Secret) bool {
	h.tb.Helper()
	x := auth.NewHostExchange(auth.Keys{Secret: s}, testHost, testNQN, 9, rand.Reader)
	mustOK(h.tb, "negotiate", h.authSend(x.Negotiate()))
	ch, c := h.authRecv()
	mustOK(h.tb, "receive challenge", c)
	reply, err := x.OnChallenge(ch)
	if err != nil {
		h.tb.Fatal(err)
	}
	mustOK(h.tb, "reply", h.authSend(reply))
	s1, c := h.authRecv()
	mustOK(h.tb, "receive success1", c)
	_, err = x.OnSuccess1(s1)
	return err == nil
}

// refusesAll checks that admin commands (or I/O when io) are refused with
// Authentication Required.
func refusesAll(t *testing.T, h *host, io bool) {
	t.Helper()
	if io {
		expectStatus(t, "read", h.do(rwSQE(pdu.IORead, 1, 0, 1, false), nil, make([]byte, nsBS)), pdu.SCAuthRequired, true)
		return
	}
	expectStatus(t, "property get", h.propGet(pdu.PropCAP, true), pdu.SCAuthRequired, true)
	expectStatus(t, "property set", h.propSet(pdu.PropCC, pdu.CCEnable), pdu.SCAuthRequired, true)
	_, c := h.identify(pdu.CNSController, 0)
	expectStatus(t, "identify", c, pdu.SCAuthRequired, true)
}

// TestAuthGate: a queue of a host with keys gets the ATR bit at Connect
// and nothing but the authentication exchange until it succeeds, on the
// admin queue and on each I/O queue; a failed exchange leaves it shut.
func TestAuthGate(t *testing.T) {
	f, s := authFixture(t)
	a := dial(t, f.t.Addr(0), pdu.Digests{})
	c := a.connect(0, 31, pdu.CNTLIDDynamic, testNQN, testHost, 0, 0)
	mustOK(t, "admin connect", c)
	if c.DW0&pdu.ConnectAuthReq == 0 {
		t.Fatalf("connect dw0 %#x lacks ATR", c.DW0)
	}
	cntlid := uint16(c.DW0)
	refusesAll(t, a, false)
	_, c = a.authRecv()
	expectStatus(t, "receive before negotiate", c, pdu.SCCommandSequenceError, true)
	bad := pdu.AuthSendSQE(0, 72)
	bad.CDW10 = 0x01<<8 | 0x01<<16 | 0xEA<<24
	expectStatus(t, "secp 0xEA", a.do(bad, make([]byte, 72), nil), pdu.SCInvalidField, true)

	wrong, _ := auth.GenerateSecret(rand.Reader, auth.HashSHA256, 0)
	if a.authenticate(wrong) {
		t.Fatal("wrong secret: Success1")
	}
	refusesAll(t, a, false)
	if !a.authenticate(s) {
		t.Fatal("right secret refused")
	}
	a.enable(true)

	io := dial(t, f.t.Addr(0), pdu.Digests{})
	c = io.connect(1, 127, cntlid, testNQN, testHost, 0, 0)
	if !c.Status.Success() || c.DW0&pdu.ConnectAuthReq == 0 {
		t.Fatalf("io connect: %v dw0 %#x, want ATR", c.Status, c.DW0)
	}
	refusesAll(t, io, true)
	if !io.authenticate(s) {
		t.Fatal("io queue: right secret refused")
	}
	mustOK(t, "read after auth", io.do(rwSQE(pdu.IORead, 1, 0, 1, false), nil, make([]byte, nsBS)))

	other := dial(t, f.t.Addr(0), pdu.Digests{})
	expectStatus(t, "host without keys", other.connect(0, 31, pdu.CNTLIDDynamic, testNQN, "nqn.2026-01.io.example:other", 0, 0),
		pdu.SCConnectInvalidHost, true)
}
