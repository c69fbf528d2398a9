// Package auth is NVMe in-band authentication, DH-HMAC-CHAP (NVMe base
// specification 2.0 section 8.13, TP 8006; Linux 6.0+): secrets in the
// "DHHC-1:hh:base64(key||crc32):" form nvme-cli makes, the key transform,
// the Diffie-Hellman groups, the authentication message codecs and the
// two sides of the exchange as state machines over message bytes
// (HostExchange for the initiator, CtrlExchange for the target). The
// transports carry the messages in AUTH_SEND/AUTH_RECEIVE fabrics
// commands. Nothing here does IO; randomness comes from an io.Reader the
// caller passes (crypto/rand.Reader outside tests).
package auth

import (
	"bytes"
	"crypto/hmac"
	"errors"
	"fmt"
	"io"

	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

// ErrSecret marks a malformed secret.
var ErrSecret = errors.New("invalid DH-HMAC-CHAP secret")

// Secret is a DH-HMAC-CHAP secret: Key, and the hash (HashSHA256..512, or
// 0 for none) that transforms it with the NQN before use.
type Secret struct {
	Hash uint8
	Key  []byte
}

// CheckSecrets parses each secret that is not "" (a host's, then the
// controller's for bidirectional authentication); mistakes are ErrSecret.
func CheckSecrets(secrets ...string) error {
	for _, s := range secrets {
		if _, err := ParseSecret(s); s != "" && err != nil {
			return err
		}
	}
	return nil
}

// ParseSecret reads "DHHC-1:hh:BASE64:" where BASE64 holds the key (32, 48
// or 64 bytes) and its CRC-32 (little-endian).
func ParseSecret(s string) (Secret, error) {
	h, key, err := tlspsk.ParseRepresentation(s, "DHHC-1")
	if err != nil {
		return Secret{}, fmt.Errorf("%w: %w", ErrSecret, err)
	}
	if h > HashSHA512 {
		return Secret{}, fmt.Errorf("%w: transform %02x (00-03)", ErrSecret, h)
	}
	if n := len(key); n != 32 && n != 48 && n != 64 {
		return Secret{}, fmt.Errorf("%w: key of %d bytes (32, 48 or 64)", ErrSecret, n)
	}
	return Secret{Hash: h, Key: key}, nil
}

// String is the DHHC-1 representation.
func (s Secret) String() string { return tlspsk.Representation("DHHC-1", s.Hash, s.Key) }

// GenerateSecret makes a random secret of keyLen bytes (0: the length of
// hash's digest, 32 for none) transformed with hash, as nvme
// gen-dhchap-key does.
func GenerateSecret(rand io.Reader, hash uint8, keyLen int) (Secret, error) {
	if hash > HashSHA512 {
		return Secret{}, fmt.Errorf("%w: hash %d (0-3)", ErrSecret, hash)
	}
	if keyLen == 0 {
		keyLen = max(hashLen(hash), 32)
	}
	if keyLen != 32 && keyLen != 48 && keyLen != 64 {
		return Secret{}, fmt.Errorf("%w: key length %d (32, 48 or 64)", ErrSecret, keyLen)
	}
	key := make([]byte, keyLen)
	if _, err := io.ReadFull(rand, key); err != nil {
		return Secret{}, err
	}
	return Secret{Hash: hash, Key: key}, nil
}

// Transform is the key used for responses: HMAC(Key, nqn ||
// "NVMe-over-Fabrics") with the secret's hash, or Key itself for none.
// The host secret is transformed with the host NQN, the controller secret
// with the subsystem NQN.
func (s Secret) Transform(nqn string) []byte {
	if s.Hash == 0 {
		return bytes.Clone(s.Key)
	}
	m := hmac.New(hashFunc(s.Hash), s.Key)
	m.Write([]byte(nqn))
	m.Write([]byte("NVMe-over-Fabrics"))
	return m.Sum(nil)
}
