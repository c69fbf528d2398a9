package auth

import (
	"crypto/rand"
	"errors"
	"testing"
)

const (
	tHost = "nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-050403020100"
	tSub  = "nqn.2026-01.io.nvstripe:x"
)

func mustSecret(t *testing.T, h uint8) Secret {
	t.Helper()
	s, err := GenerateSecret(rand.Reader, h, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// exchange runs one authentication in memory; it returns the host's error
// and whether the controller considers the queue authenticated.
func exchange(t *testing.T, host, ctrl Keys) (error, bool) {
	t.Helper()
	hx := NewHostExchange(host, tHost, tSub, 7, rand.Reader)
	cx := NewCtrlExchange(ctrl, tHost, tSub, rand.Reader)
	if err := cx.Send(hx.Negotiate()); err != nil {
		t.Fatal(err)
	}
	reply, err := hx.OnChallenge(cx.Receive())
	if err != nil {
		if reply != nil {
			cx.Send(reply)
		}
		return err, cx.Authenticated()
	}
	cx.Send(reply)
	s2, err := hx.OnSuccess1(cx.Receive())
	if s2 != nil {
		cx.Send(s2)
	}
	return err, cx.Authenticated()
}

func TestExchange(t *testing.T) {
	for _, h := range AllHashes {
		for _, g := range AllDHGroups {
			hk, ck := mustSecret(t, h), mustSecret(t, h)
			keys := Keys{Secret: hk, Hashes: []uint8{h}, DHGroups: []uint8{g}}
			if err, ok := exchange(t, keys, keys); err != nil || !ok {
				t.Errorf("%s %s unidirectional: %v, authenticated %t", HashName(h), DHGroupName(g), err, ok)
			}
			bi := keys
			bi.CtrlSecret = &ck
			if err, ok := exchange(t, bi, bi); err != nil || !ok {
				t.Errorf("%s %s bidirectional: %v, authenticated %t", HashName(h), DHGroupName(g), err, ok)
			}
		}
	}
}

func TestExchangeRefused(t *testing.T) {
	good, other, ctrl := mustSecret(t, 1), mustSecret(t, 1), mustSecret(t, 1)
	wrongCtrl := mustSecret(t, 1)
	tests := []struct {
		name       string
		host, ctrl Keys
		reason     uint8
		remote     bool
	}{
		{"wrong host secret", Keys{Secret: other}, Keys{Secret: good}, ReasonFailed, true},
		{"wrong controller secret", Keys{Secret: good, CtrlSecret: &wrongCtrl}, Keys{Secret: good, CtrlSecret: &ctrl}, ReasonFailed, false},
		{"bidirectional without a controller secret", Keys{Secret: good, CtrlSecret: &ctrl}, Keys{Secret: good}, ReasonFailed, true},
		{"no common hash", Keys{Secret: good, Hashes: []uint8{HashSHA256}}, Keys{Secret: good, Hashes: []uint8{HashSHA512}}, ReasonHashUnusable, true},
		{"no common group", Keys{Secret: good, DHGroups: []uint8{DHNull}}, Keys{Secret: good, DHGroups: []uint8{DHFFDHE2048}}, ReasonDHUnusable, true},
	}
	for _, tc := range tests {
		err, ok := exchange(t, tc.host, tc.ctrl)
		var fe *FailureError
		if !errors.As(err, &fe) || !errors.Is(err, ErrFailed) || fe.Reason != tc.reason || fe.Remote != tc.remote || ok {
			t.Errorf("%s: %v (authenticated %t), want reason %d remote %t", tc.name, err, ok, tc.reason, tc.remote)
		}
	}
}

// TestReplay: a Reply recorded from one exchange does not authenticate
// another (fresh challenge), and messages out of order are refused.
func TestReplay(t *testing.T) {
	k := Keys{Secret: mustSecret(t, 1), DHGroups: []uint8{DHNull}}
	hx := NewHostExchange(k, tHost, tSub, 1, rand.Reader)
	cx := NewCtrlExchange(k, tHost, tSub, rand.Reader)
	cx.Send(hx.Negotiate())
	old, err := hx.OnChallenge(cx.Receive())
	if err != nil {
		t.Fatal(err)
	}
	cx2 := NewCtrlExchange(k, tHost, tSub, rand.Reader)
	cx2.Send(NewHostExchange(k, tHost, tSub, 1, rand.Reader).Negotiate())
	cx2.Receive()
	cx2.Send(old)
	if out := cx2.Receive(); remoteFailure(out) == nil || cx2.Authenticated() {
		t.Fatalf("replayed reply: answer %x, authenticated %t", out, cx2.Authenticated())
	}
	cx3 := NewCtrlExchange(k, tHost, tSub, rand.Reader)
	cx3.Send(old)
	if out := cx3.Receive(); remoteFailure(out) == nil || cx3.Authenticated() {
		t.Fatalf("reply before negotiate: answer %x", out)
	}
	if cx3.Receive() != nil {
		t.Fatal("a second receive with nothing due answered")
	}
}
