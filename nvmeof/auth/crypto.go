package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/big"
)

// Hash function identifiers (HMAC).
const (
	HashSHA256 uint8 = 1
	HashSHA384 uint8 = 2
	HashSHA512 uint8 = 3
)

// Diffie-Hellman group identifiers; DHNull is none (plain CHAP).
const (
	DHNull      uint8 = 0
	DHFFDHE2048 uint8 = 1
	DHFFDHE3072 uint8 = 2
	DHFFDHE4096 uint8 = 3
	DHFFDHE6144 uint8 = 4
	DHFFDHE8192 uint8 = 5
)

// AllHashes and AllDHGroups are everything this package supports,
// strongest hash first, null DH group first (cheapest).
var (
	AllHashes   = []uint8{HashSHA512, HashSHA384, HashSHA256}
	AllDHGroups = []uint8{DHNull, DHFFDHE2048, DHFFDHE3072, DHFFDHE4096, DHFFDHE6144, DHFFDHE8192}
)

func hashFunc(id uint8) func() hash.Hash {
	switch id {
	case HashSHA256:
		return sha256.New
	case HashSHA384:
		return sha512.New384
	case HashSHA512:
		return sha512.New
	}
	return nil
}

func hashLen(id uint8) int {
	if f := hashFunc(id); f != nil {
		return f().Size()
	}
	return 0
}

// HashName and DHGroupName name identifiers as nvmet's configfs does.
func HashName(id uint8) string {
	return map[uint8]string{HashSHA256: "hmac(sha256)", HashSHA384: "hmac(sha384)", HashSHA512: "hmac(sha512)"}[id]
}

func DHGroupName(id uint8) string {
	return map[uint8]string{DHNull: "null", DHFFDHE2048: "ffdhe2048", DHFFDHE3072: "ffdhe3072",
		DHFFDHE4096: "ffdhe4096", DHFFDHE6144: "ffdhe6144", DHFFDHE8192: "ffdhe8192"}[id]
}

// ParseHash and ParseDHGroup read those names (also "sha256", "2048"...).
func ParseHash(s string) (uint8, error) {
	for _, id := range AllHashes {
		if n := HashName(id); s == n || "hmac("+s+")" == n {
			return id, nil
		}
	}
	return 0, fmt.Errorf("unknown DH-HMAC-CHAP hash %q (sha256, sha384, sha512)", s)
}

func ParseDHGroup(s string) (uint8, error) {
	for _, id := range AllDHGroups {
		if n := DHGroupName(id); s == n || "ffdhe"+s == n {
			return id, nil
		}
	}
	return 0, fmt.Errorf("unknown DH group %q (null, ffdhe2048 ... ffdhe8192)", s)
}

func prime(g uint8) *big.Int {
	p, _ := new(big.Int).SetString(ffdhePrimes[g], 16)
	return p
}

// dhLen is the byte length of group g's public values (0 for null, -1
// for an unknown group).
func dhLen(g uint8) int {
	if g == DHNull {
		return 0
	}
	if _, ok := ffdhePrimes[g]; !ok {
		return -1
	}
	return (prime(g).BitLen() + 7) / 8
}

// dhPrivateBits is the private exponent size: above twice the strength
// of the largest group (RFC 7919 section 5.2).
const dhPrivateBits = 512

// dhKeyPair makes a private exponent and its public value 2^x mod p.
func dhKeyPair(rand io.Reader, g uint8) (x *big.Int, pub []byte, err error) {
	b := make([]byte, dhPrivateBits/8)
	if _, err := io.ReadFull(rand, b); err != nil {
		return nil, nil, err
	}
	x = new(big.Int).SetBytes(b)
	p := prime(g)
	y := new(big.Int).Exp(big.NewInt(2), x, p)
	return x, y.FillBytes(make([]byte, dhLen(g))), nil
}

var errPeerPublic = errors.New("peer DH public value out of range")

// dhShared is peer^x mod p, padded to the prime's length; peer must be in
// (1, p-1).
func dhShared(g uint8, x *big.Int, peer []byte) ([]byte, error) {
	p := prime(g)
	y := new(big.Int).SetBytes(peer)
	pm1 := new(big.Int).Sub(p, big.NewInt(1))
	if len(peer) != dhLen(g) || y.Cmp(big.NewInt(1)) <= 0 || y.Cmp(pm1) >= 0 {
		return nil, errPeerPublic
	}
	return new(big.Int).Exp(y, x, p).FillBytes(make([]byte, dhLen(g))), nil
}

// augment is the challenge a response answers: c itself without DH, else
// HMAC(H(z), c) with z the shared DH secret.
func augment(h uint8, c, z []byte) []byte {
	if z == nil {
		return c
	}
	d := hashFunc(h)()
	d.Write(z)
	m := hmac.New(hashFunc(h), d.Sum(nil))
	m.Write(c)
	return m.Sum(nil)
}

// response is HMAC(key, ca || LE32(seq) || LE16(tid) || 0x00 (SC_C) ||
// role || nqn1 || 0x00 || nqn2): role "HostHost" with (host, subsystem)
// for R1, "Controller" with (subsystem, host) for R2.
func response(h uint8, key, ca []byte, seq uint32, tid uint16, role, nqn1, nqn2 string) []byte {
	m := hmac.New(hashFunc(h), key)
	m.Write(ca)
	var b [7]byte
	binary.LittleEndian.PutUint32(b[0:], seq)
	binary.LittleEndian.PutUint16(b[4:], tid)
	m.Write(b[:])
	m.Write([]byte(role))
	m.Write([]byte(nqn1))
	m.Write([]byte{0})
	m.Write([]byte(nqn2))
	return m.Sum(nil)
}

// HostResponse is R1 (what the host proves), ControllerResponse R2.
func HostResponse(h uint8, hostKey, ca []byte, seq uint32, tid uint16, hostNQN, subNQN string) []byte {
	return response(h, hostKey, ca, seq, tid, "HostHost", hostNQN, subNQN)
}

func ControllerResponse(h uint8, ctrlKey, ca []byte, seq uint32, tid uint16, subNQN, hostNQN string) []byte {
	return response(h, ctrlKey, ca, seq, tid, "Controller", subNQN, hostNQN)
}

// nonzeroSeq is a random sequence number other than 0.
func nonzeroSeq(rand io.Reader) (uint32, error) {
	var b [4]byte
	for {
		if _, err := io.ReadFull(rand, b[:]); err != nil {
			return 0, err
		}
		if s := binary.LittleEndian.Uint32(b[:]); s != 0 {
			return s, nil
		}
	}
}
