package tlspsk

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strings"
)

// ErrKey marks a malformed NVMe TLS key or PSK identity.
var ErrKey = errors.New("invalid NVMe TLS key")

// Key hashes of the interchange format ("NVMeTLSkey-1:hh:...").
const (
	HashNone   = 0 // the configured key is the retained key
	HashSHA256 = 1 // 32-byte key, TLS_AES_128_GCM_SHA256
	HashSHA384 = 2 // 48-byte key, TLS_AES_256_GCM_SHA384
)

// Key is a configured NVMe/TCP TLS PSK: Secret, and the hash that derives
// the retained PSK from it (HashSHA256, HashSHA384, or HashNone when the
// secret is used as the retained PSK).
type Key struct {
	Hash   uint8
	Secret []byte
}

// ParseKey reads "NVMeTLSkey-1:hh:BASE64:" where BASE64 holds the key (32
// or 48 bytes, 32 for hh 01, 48 for hh 02) and its CRC-32 (little-endian).
func ParseKey(s string) (Key, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 4 || parts[0] != "NVMeTLSkey-1" || parts[3] != "" || len(parts[1]) != 2 {
		return Key{}, fmt.Errorf("%w: want NVMeTLSkey-1:hh:BASE64:", ErrKey)
	}
	var h uint8
	switch parts[1] {
	case "00":
		h = HashNone
	case "01":
		h = HashSHA256
	case "02":
		h = HashSHA384
	default:
		return Key{}, fmt.Errorf("%w: hash %q (00, 01 or 02)", ErrKey, parts[1])
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		return Key{}, fmt.Errorf("%w: %w", ErrKey, err)
	}
	n := len(raw) - 4
	if want := keyLen(h); n != 32 && n != 48 || want != 0 && n != want {
		return Key{}, fmt.Errorf("%w: key of %d bytes with hash %s", ErrKey, max(n, 0), parts[1])
	}
	if crc32.ChecksumIEEE(raw[:n]) != binary.LittleEndian.Uint32(raw[n:]) {
		return Key{}, fmt.Errorf("%w: CRC mismatch", ErrKey)
	}
	return Key{Hash: h, Secret: raw[:n]}, nil
}

// keyLen is the key length hash h requires, 0 for any.
func keyLen(h uint8) int {
	switch h {
	case HashSHA256:
		return 32
	case HashSHA384:
		return 48
	}
	return 0
}

// String is the interchange form.
func (k Key) String() string {
	raw := binary.LittleEndian.AppendUint32(bytes.Clone(k.Secret), crc32.ChecksumIEEE(k.Secret))
	return fmt.Sprintf("NVMeTLSkey-1:%02x:%s:", k.Hash, base64.StdEncoding.EncodeToString(raw))
}

// GenerateKey makes a random key for hash (HashSHA256 or HashSHA384).
func GenerateKey(rand io.Reader, h uint8) (Key, error) {
	n := keyLen(h)
	if n == 0 {
		return Key{}, fmt.Errorf("%w: hash %d (1 SHA-256 or 2 SHA-384)", ErrKey, h)
	}
	k := Key{Hash: h, Secret: make([]byte, n)}
	if _, err := io.ReadFull(rand, k.Secret); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Suite is the cipher suite the key's TLS PSK is used with: it follows the
// retained PSK's length (32 bytes SHA-256, 48 bytes SHA-384).
func (k Key) Suite() *Suite {
	if len(k.Secret) == 48 {
		return suiteAES256
	}
	return suiteAES128
}

// Identity is the TLS PSK identity of a retained key for a host and a
// subsystem: "NVMe0R0h <hostnqn> <subnqn>", h the suite's hash.
func Identity(s *Suite, hostNQN, subNQN string) string {
	return fmt.Sprintf("NVMe0R%02d %s %s", s.hashID, hostNQN, subNQN)
}

// ParseIdentity splits a retained-PSK identity into its hash ID and NQNs.
func ParseIdentity(id string) (hashID int, hostNQN, subNQN string, err error) {
	f := strings.Split(id, " ")
	if len(f) != 3 || f[1] == "" || f[2] == "" {
		return 0, "", "", fmt.Errorf("%w: identity %q is not NVMe0R0h HOSTNQN SUBNQN", ErrKey, id)
	}
	switch f[0] {
	case "NVMe0R01":
		hashID = HashSHA256
	case "NVMe0R02":
		hashID = HashSHA384
	default:
		return 0, "", "", fmt.Errorf("%w: identity %q is not a retained PSK identity (NVMe0R01 or NVMe0R02)", ErrKey, f[0])
	}
	return hashID, f[1], f[2], nil
}

// PSK is what a host and a subsystem use in the TLS handshake for key k:
// the identity and TLS PSK (the retained PSK derived with the host NQN,
// then the TLS PSK with the identity, as the NVMe/TCP transport
// specification says) and the cipher suite.
func (k Key) PSK(hostNQN, subNQN string) (identity string, psk []byte, s *Suite, err error) {
	if len(hostNQN) > 223 || len(subNQN) > 223 || hostNQN == "" || subNQN == "" ||
		strings.ContainsAny(hostNQN+subNQN, " \x00") {
		return "", nil, nil, fmt.Errorf("%w: NQNs must be 1 to 223 bytes without spaces", ErrKey)
	}
	if n := keyLen(k.Hash); n == 0 && len(k.Secret) != 32 && len(k.Secret) != 48 || n != 0 && len(k.Secret) != n {
		return "", nil, nil, fmt.Errorf("%w: key of %d bytes with hash %02d", ErrKey, len(k.Secret), k.Hash)
	}
	retained := k.Secret
	switch k.Hash {
	case HashSHA256:
		retained = expandLabel(sha256.New, extract(sha256.New, k.Secret), "HostNQN", []byte(hostNQN), len(k.Secret))
	case HashSHA384:
		retained = expandLabel(sha512.New384, extract(sha512.New384, k.Secret), "HostNQN", []byte(hostNQN), len(k.Secret))
	}
	s = k.Suite()
	identity = Identity(s, hostNQN, subNQN)
	psk = expandLabel(s.hash, extract(s.hash, retained), "nvme-tls-psk", []byte(identity), s.hashLen)
	return identity, psk, s, nil
}

// hashFunc is a hash constructor (sha256.New, sha512.New384).
type hashFunc = func() hash.Hash
