package tlspsk

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// The expected PSKs were computed with OpenSSL's HKDF (openssl kdf HKDF,
// empty salt) over the HkdfLabel that SPDK's nvme_tcp_derive_retained_psk
// and nvme_tcp_derive_tls_psk build (length, "tls13 " label, context); the
// first key is the one SPDK's TLS tests configure.
func TestKeyPSKVectors(t *testing.T) {
	for _, tc := range []struct {
		key, host, sub, identity, retained, psk string
	}{
		{
			key:  "NVMeTLSkey-1:01:MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmZwJEiQ:",
			host: "nqn.2016-06.io.spdk:host1", sub: "nqn.2016-06.io.spdk:cnode1",
			identity: "NVMe0R01 nqn.2016-06.io.spdk:host1 nqn.2016-06.io.spdk:cnode1",
			retained: "1fec2d4b69d3cb88e56214d464f00b168d2a635024b7a893aa6fad2840f49f2a",
			psk:      "45956d30221db43e664e8d6e78a79c31a81824cbd12acfdaca0e6032b335bbd9",
		},
		{
			key:  "NVMeTLSkey-1:02:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vcSEgBQ==:",
			host: "nqn.2014-08.org.nvmexpress:uuid:host", sub: "nqn.2026-01.io.nvstripe:sub",
			identity: "NVMe0R02 nqn.2014-08.org.nvmexpress:uuid:host nqn.2026-01.io.nvstripe:sub",
			retained: "1ebfc196699d542dcebe7cc7c571514cb6c43e9f9ec2607bf399c6f7d2e45ad9fb8251c336eeed5f0cb76d8fa701af66",
			psk:      "994dd4adac396ecdf86e92ef21e5b4de3f8eaa75a0cc897daca9ac567b4bba54d4854c185f894706f3d0f228e67fe3b4",
		},
	} {
		k, err := ParseKey(tc.key)
		if err != nil {
			t.Fatal(err)
		}
		if k.String() != tc.key {
			t.Errorf("String() = %q, want %q", k, tc.key)
		}
		id, psk, _, err := k.PSK(tc.host, tc.sub)
		if err != nil {
			t.Fatal(err)
		}
		if id != tc.identity || hex.EncodeToString(psk) != tc.psk {
			t.Errorf("%s: identity %q psk %x, want %q %s", tc.key, id, psk, tc.identity, tc.psk)
		}
		// hh 00: the configured key is the retained key
		retained, _ := hex.DecodeString(tc.retained)
		_, psk0, _, err := Key{Hash: HashNone, Secret: retained}.PSK(tc.host, tc.sub)
		if err != nil || hex.EncodeToString(psk0) != tc.psk {
			t.Errorf("retained key as hash 00: psk %x %v, want %s", psk0, err, tc.psk)
		}
	}
}

func TestParseKeyRejects(t *testing.T) {
	good := "NVMeTLSkey-1:01:MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmZwJEiQ:"
	for _, s := range []string{
		"", "NVMeTLSkey-1:01:", "DHHC-1:01:MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmZwJEiQ:",
		"NVMeTLSkey-1:03:MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmZwJEiQ:",
		"NVMeTLSkey-1:02:MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmZwJEiQ:", // 32-byte key with hash 02
		"NVMeTLSkey-1:01:MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmZwJEiR:", // CRC
		"NVMeTLSkey-1:01:!!!:", good + "x", good[:len(good)-1],
	} {
		if _, err := ParseKey(s); !errors.Is(err, ErrKey) {
			t.Errorf("ParseKey(%q) = %v, want ErrKey", s, err)
		}
	}
	k, _ := ParseKey(good)
	for _, nqns := range [][2]string{{"", "s"}, {"h", ""}, {"h x", "s"}, {"h", string(bytes.Repeat([]byte("s"), 224))}} {
		if _, _, _, err := k.PSK(nqns[0], nqns[1]); !errors.Is(err, ErrKey) {
			t.Errorf("PSK(%q, %q) = %v, want ErrKey", nqns[0], nqns[1], err)
		}
	}
}

func TestGenerateKeyRoundTrip(t *testing.T) {
	for _, h := range []uint8{HashSHA256, HashSHA384} {
		k, err := GenerateKey(rand.Reader, h)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseKey(k.String())
		if err != nil || back.Hash != h || !bytes.Equal(back.Secret, k.Secret) {
			t.Fatalf("round trip of %s: %+v %v", k, back, err)
		}
	}
	if _, err := GenerateKey(rand.Reader, HashNone); !errors.Is(err, ErrKey) {
		t.Errorf("GenerateKey(none) = %v, want ErrKey", err)
	}
}

func TestParseIdentity(t *testing.T) {
	h, host, sub, err := ParseIdentity("NVMe0R02 nqn.a nqn.b")
	if err != nil || h != HashSHA384 || host != "nqn.a" || sub != "nqn.b" {
		t.Fatalf("got %d %q %q %v", h, host, sub, err)
	}
	for _, id := range []string{"NVMe0R01 a", "NVMe0G01 a b", "NVMe1R01 a b c", "NVMe0R01  b", "NVMe0R03 a b"} {
		if _, _, _, err := ParseIdentity(id); !errors.Is(err, ErrKey) {
			t.Errorf("ParseIdentity(%q) = %v, want ErrKey", id, err)
		}
	}
}

// TestRepresentation: a key round-trips through Representation and
// ParseRepresentation with any prefix and hh; the prefix, hh (two hex
// digits), the base64, its length and the CRC are checked.
func TestRepresentation(t *testing.T) {
	key := bytes.Repeat([]byte{0xa5}, 48)
	good := Representation("DHHC-1", 0x03, key)
	if h, k, err := ParseRepresentation(good, "DHHC-1"); err != nil || h != 3 || !bytes.Equal(k, key) {
		t.Fatalf("round trip of %s: %d %x %v", good, h, k, err)
	}
	for _, bad := range []string{good[:len(good)-1], "NVMeTLSkey-1" + good[6:], "DHHC-1:0g" + good[9:],
		"DHHC-1:3 " + good[9:], "DHHC-1:03:!!!:", "DHHC-1:03:AAA=:", strings.Replace(good, good[10:14], "AAAA", 1)} {
		if _, _, err := ParseRepresentation(bad, "DHHC-1"); err == nil {
			t.Errorf("ParseRepresentation(%q) accepted", bad)
		}
	}
}
