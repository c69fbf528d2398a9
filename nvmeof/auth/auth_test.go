package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

type vector struct {
	H          uint8  `json:"hash"`
	G          uint8  `json:"dhgroup"`
	HostNQN    string `json:"host_nqn"`
	SubNQN     string `json:"sub_nqn"`
	TID        uint16 `json:"tid"`
	S1         uint32 `json:"s1"`
	S2         uint32 `json:"s2"`
	HostSecret string `json:"host_secret"`
	CtrlSecret string `json:"ctrl_secret"`
	HostKeyT   string `json:"host_key_transformed"`
	CtrlKeyT   string `json:"ctrl_key_transformed"`
	C1         string `json:"c1"`
	C2         string `json:"c2"`
	HostPriv   string `json:"host_private"`
	CtrlPriv   string `json:"ctrl_private"`
	HostPublic string `json:"host_public"`
	CtrlPublic string `json:"ctrl_public"`
	Shared     string `json:"shared"`
	R1         string `json:"r1"`
	R2         string `json:"r2"`
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKnownAnswers checks the key transform, the DH values and the
// responses against vectors computed independently with Python's
// hmac/hashlib and OpenSSL's primes (testdata/vectors.py).
func TestKnownAnswers(t *testing.T) {
	raw, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) != 18 {
		t.Fatalf("%d vectors, want 3 hashes x 6 groups", len(vs))
	}
	for _, v := range vs {
		name := HashName(v.H) + "/" + DHGroupName(v.G)
		hs, err := ParseSecret(v.HostSecret)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cs, err := ParseSecret(v.CtrlSecret)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if hs.String() != v.HostSecret {
			t.Errorf("%s: secret round trip %s, want %s", name, hs, v.HostSecret)
		}
		kh, kc := hs.Transform(v.HostNQN), cs.Transform(v.SubNQN)
		if hex.EncodeToString(kh) != v.HostKeyT || hex.EncodeToString(kc) != v.CtrlKeyT {
			t.Errorf("%s: transformed keys differ", name)
		}
		var z []byte
		if v.G != DHNull {
			xh, hpub, err := dhKeyPair(bytes.NewReader(unhex(t, v.HostPriv)), v.G)
			if err != nil {
				t.Fatal(err)
			}
			xc, cpub, _ := dhKeyPair(bytes.NewReader(unhex(t, v.CtrlPriv)), v.G)
			if hex.EncodeToString(hpub) != v.HostPublic || hex.EncodeToString(cpub) != v.CtrlPublic {
				t.Errorf("%s: public values differ", name)
			}
			z, err = dhShared(v.G, xh, cpub)
			z2, err2 := dhShared(v.G, xc, hpub)
			if err != nil || err2 != nil || hex.EncodeToString(z) != v.Shared || !bytes.Equal(z, z2) {
				t.Errorf("%s: shared secret differs (%v %v)", name, err, err2)
			}
		}
		r1 := HostResponse(v.H, kh, augment(v.H, unhex(t, v.C1), z), v.S1, v.TID, v.HostNQN, v.SubNQN)
		r2 := ControllerResponse(v.H, kc, augment(v.H, unhex(t, v.C2), z), v.S2, v.TID, v.SubNQN, v.HostNQN)
		if hex.EncodeToString(r1) != v.R1 || hex.EncodeToString(r2) != v.R2 {
			t.Errorf("%s: responses differ:\n r1 %x\nwant %s\n r2 %x\nwant %s", name, r1, v.R1, r2, v.R2)
		}
	}
}

func TestParseSecret(t *testing.T) {
	// nvme-cli's documentation example; its CRC is 0xa70d69fa.
	s, err := ParseSecret("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:")
	if err != nil || s.Hash != 0 || len(s.Key) != 32 {
		t.Fatalf("nvme-cli example: %+v %v", s, err)
	}
	good := s.String()
	for _, bad := range []string{"", "DHHC-1:00:ia6z:", "DHHC-2" + good[6:], "DHHC-1:04" + good[9:], good[:len(good)-1],
		strings.Replace(good, "ia6z", "ia6y", 1), "DHHC-1:00:" + strings.Repeat("A", 40) + ":",
		"DHHC-1:0g" + good[9:], "DHHC-1:1 " + good[9:], "DHHC-1:00:AAA=:"} { // hh not hex; 2 bytes, no key and CRC
		if _, err := ParseSecret(bad); !errors.Is(err, ErrSecret) {
			t.Errorf("ParseSecret(%q): %v, want ErrSecret", bad, err)
		}
	}
	for h := uint8(0); h <= 3; h++ {
		g, err := GenerateSecret(rand.Reader, h, 0)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseSecret(g.String())
		if err != nil || !bytes.Equal(back.Key, g.Key) || back.Hash != h || len(g.Key) != max(hashLen(h), 32) {
			t.Errorf("hash %d: %v %v", h, back, err)
		}
	}
}

// TestNVMeCLIKeys: keys nvme gen-dhchap-key makes parse, and with a given
// secret its transformed key is ours (nvme-cli 2.x stores it transformed).
func TestNVMeCLIKeys(t *testing.T) {
	if _, err := exec.LookPath("nvme"); err != nil {
		t.Skip("nvme-cli (nvme) not installed")
	}
	const nqn = "nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-4908-8706-050403020100"
	key := bytes.Repeat([]byte{0x5a, 0xa5}, 32)
	for h := uint8(0); h <= 3; h++ {
		n := max(hashLen(h), 32)
		out, err := exec.Command("nvme", "gen-dhchap-key", "--hmac="+string('0'+h), "--nqn="+nqn,
			"--key-length="+map[int]string{32: "32", 48: "48", 64: "64"}[n], "--secret="+hex.EncodeToString(key[:n])).Output()
		if err != nil {
			t.Fatalf("nvme gen-dhchap-key --hmac=%d: %v", h, err)
		}
		s, err := ParseSecret(string(out))
		if err != nil {
			t.Fatalf("hmac %d: %q: %v", h, out, err)
		}
		if want := (Secret{Hash: h, Key: key[:n]}).Transform(nqn); !bytes.Equal(s.Key, want) {
			t.Errorf("hmac %d: nvme-cli's key %x, our transform %x", h, s.Key, want)
		}
	}
}
