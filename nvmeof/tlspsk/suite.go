package tlspsk

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"hash"
)

// Suite is a TLS 1.3 cipher suite: TLS_AES_128_GCM_SHA256 or
// TLS_AES_256_GCM_SHA384.
type Suite struct {
	id      uint16
	name    string
	hashID  int // the NVMe identity's hash field
	hash    hashFunc
	hashLen int
	keyLen  int
}

var (
	suiteAES128 = &Suite{id: 0x1301, name: "TLS_AES_128_GCM_SHA256", hashID: HashSHA256, hash: sha256.New, hashLen: 32, keyLen: 16}
	suiteAES256 = &Suite{id: 0x1302, name: "TLS_AES_256_GCM_SHA384", hashID: HashSHA384, hash: sha512.New384, hashLen: 48, keyLen: 32}
)

// String is the suite's IANA name.
func (s *Suite) String() string { return s.name }

func suiteByID(id uint16) *Suite {
	switch id {
	case suiteAES128.id:
		return suiteAES128
	case suiteAES256.id:
		return suiteAES256
	}
	return nil
}

// extract is HKDF-Extract with an all-zero salt.
func extract(h hashFunc, secret []byte) []byte {
	prk, err := hkdf.Extract(h, secret, nil)
	if err != nil { // only for FIPS-restricted hashes, which these are not
		return make([]byte, h().Size())
	}
	return prk
}

// extractSalt is HKDF-Extract(salt, secret).
func extractSalt(h hashFunc, salt, secret []byte) []byte {
	prk, err := hkdf.Extract(h, secret, salt)
	if err != nil {
		return make([]byte, h().Size())
	}
	return prk
}

// expandLabel is HKDF-Expand-Label of RFC 8446 section 7.1: the info is
// length (2 bytes), "tls13 "+label and context, each with a 1-byte length.
func expandLabel(h hashFunc, secret []byte, label string, context []byte, length int) []byte {
	info := make([]byte, 0, 4+6+len(label)+len(context))
	info = binary.BigEndian.AppendUint16(info, uint16(length))
	info = append(info, byte(6+len(label)))
	info = append(info, "tls13 "...)
	info = append(info, label...)
	info = append(info, byte(len(context)))
	info = append(info, context...)
	out, err := hkdf.Expand(h, secret, string(info), length)
	if err != nil {
		return make([]byte, length)
	}
	return out
}

// deriveSecret is Derive-Secret(secret, label, transcript hash).
func (s *Suite) deriveSecret(secret []byte, label string, transcript hash.Hash) []byte {
	var sum []byte
	if transcript != nil {
		sum = transcript.Sum(nil)
	} else {
		sum = s.hash().Sum(nil)
	}
	return expandLabel(s.hash, secret, label, sum, s.hashLen)
}

// finished is the verify data of a Finished message (and a PSK binder):
// HMAC over the transcript hash with the finished key of base.
func (s *Suite) finished(base []byte, transcriptSum []byte) []byte {
	key := expandLabel(s.hash, base, "finished", nil, s.hashLen)
	m := hmac.New(s.hash, key)
	m.Write(transcriptSum)
	return m.Sum(nil)
}

// aead builds the record protection of a traffic secret.
func (s *Suite) aead(secret []byte) (cipher.AEAD, []byte) {
	key := expandLabel(s.hash, secret, "key", nil, s.keyLen)
	iv := expandLabel(s.hash, secret, "iv", nil, 12)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, nil
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		return nil, nil
	}
	return g, iv
}
