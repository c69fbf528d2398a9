package auth

import (
	"crypto/rand"
	"testing"
)

// FuzzCtrlExchange: any messages a host sends, in any order, get answers
// or refusals, never a panic, and never authenticate without the secret.
func FuzzCtrlExchange(f *testing.F) {
	k := Keys{Secret: Secret{Hash: HashSHA256, Key: make([]byte, 32)}, DHGroups: []uint8{DHNull, DHFFDHE2048}}
	hx := NewHostExchange(k, tHost, tSub, 3, rand.Reader)
	neg := hx.Negotiate()
	f.Add(neg, []byte{}, []byte{})
	f.Add(neg, reply{tid: 3, r: make([]byte, 32), c2: make([]byte, 32)}.marshal(), success2(3))
	f.Add(failure(idFailure2, 3, 1), neg, []byte{1, 4, 0, 0, 3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, m1, m2, m3 []byte) {
		other := Keys{Secret: Secret{Hash: HashSHA256, Key: []byte("a different secret of 32 bytes!!")}, DHGroups: []uint8{DHNull, 9, DHFFDHE2048}, Hashes: []uint8{0, HashSHA256, 7}}
		cx := NewCtrlExchange(other, tHost, tSub, rand.Reader)
		for _, m := range [][]byte{m1, m2, m3} {
			cx.Send(m)
			cx.Receive()
		}
		if cx.Authenticated() {
			t.Fatal("authenticated without the secret")
		}
	})
}

// FuzzHostExchange: any controller answers are refused or answered, never
// a panic.
func FuzzHostExchange(f *testing.F) {
	f.Add(challenge{tid: 1, hash: HashSHA256, dhGroup: DHNull, seq: 1, c: make([]byte, 32)}.marshal(), success1(1, 32, nil))
	f.Add(challenge{tid: 1, hash: HashSHA256, dhGroup: 9, seq: 1, c: make([]byte, 32)}.marshal(), []byte{})
	f.Add([]byte{1, 1, 0, 0, 1, 0, 32, 0, 1, 5, 0, 4}, failure(idFailure1, 1, 1))
	f.Fuzz(func(t *testing.T, ch, s1 []byte) {
		cs := Secret{Hash: HashSHA256, Key: make([]byte, 32)}
		hx := NewHostExchange(Keys{Secret: cs, CtrlSecret: &cs}, tHost, tSub, 1, rand.Reader)
		hx.Negotiate()
		if _, err := hx.OnChallenge(ch); err == nil {
			hx.OnSuccess1(s1)
		}
	})
}
