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
	"strconv"
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
	h, key, err := ParseRepresentation(s, "NVMeTLSkey-1")
	if err != nil {
		return Key{}, fmt.Errorf("%w: %w", ErrKey, err)
	}
	if h > HashSHA384 {
		return Key{}, fmt.Errorf("%w: hash %02x (00, 01 or 02)", ErrKey, h)
	}
	if n, want := len(key), keyLen(h); n != 32 && n != 48 || want != 0 && n != want {
		return Key{}, fmt.Errorf("%w: key of %d bytes with hash %02x", ErrKey, n, h)
	}
	return Key{Hash: h, Secret: key}, nil
}

// ParseRepresentation reads the NVMe secret representation
// "PREFIX:hh:BASE64:", the form of TLS keys ("NVMeTLSkey-1") and of
// DH-HMAC-CHAP secrets ("DHHC-1", nvmeof/auth): hh is two hex digits, and
// BASE64 holds the key followed by its CRC-32 (little-endian), which must
// match. The caller checks hh and the key's length.
func ParseRepresentation(s, prefix string) (hh uint8, key []byte, err error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 4 || parts[0] != prefix || parts[3] != "" || len(parts[1]) != 2 {
		return 0, nil, fmt.Errorf("want %s:hh:BASE64:", prefix)
	}
	h, err := strconv.ParseUint(parts[1], 16, 8)
	if err != nil {
		return 0, nil, fmt.Errorf("hh %q is not two hex digits", parts[1])
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil {
		return 0, nil, err
	}
	if len(raw) < 4 {
		return 0, nil, fmt.Errorf("%d bytes, not a key and its CRC", len(raw))
	}
	n := len(raw) - 4
	if crc32.ChecksumIEEE(raw[:n]) != binary.LittleEndian.Uint32(raw[n:]) {
		return 0, nil, errors.New("CRC mismatch")
	}
	return uint8(h), raw[:n], nil
}

// Representation is key in the form ParseRepresentation reads.
func Representation(prefix string, hh uint8, key []byte) string {
	raw := binary.LittleEndian.AppendUint32(bytes.Clone(key), crc32.ChecksumIEEE(key))
	return fmt.Sprintf("%s:%02x:%s:", prefix, hh, base64.StdEncoding.EncodeToString(raw))
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
func (k Key) String() string { return Representation("NVMeTLSkey-1", k.Hash, k.Secret) }

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
