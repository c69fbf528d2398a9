package initiator

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/auth"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

func secret(t testing.TB, h uint8) string {
	t.Helper()
	s, err := auth.GenerateSecret(rand.Reader, h, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s.String()
}

// keyed is a fixture whose host must authenticate with hostKey (and the
// controller with ctrlKey, if set), using hash and group only.
func keyed(t *testing.T, hostKey, ctrlKey, hash, group string) *fixture {
	return newFixture(t, 1, 1<<20, func(c *target.Config) {
		c.Subsystems[0].AllowedHosts = nil
		c.Subsystems[0].HostKeys = []target.HostKey{{HostNQN: testHost, Secret: hostKey, CtrlSecret: ctrlKey,
			Hashes: []string{hash}, DHGroups: []string{group}}}
	})
}

// roundTrip writes and reads back a block through d.
func roundTrip(t *testing.T, d *Device) {
	t.Helper()
	ctx := context.Background()
	w := bytes.Repeat([]byte("auth"), 1024)
	if err := d.WriteAt(ctx, w, 4096); err != nil {
		t.Fatal(err)
	}
	r := make([]byte, len(w))
	if err := d.ReadAt(ctx, r, 4096); err != nil || !bytes.Equal(r, w) {
		t.Fatalf("read back: %v", err)
	}
}

// TestAuthGroupsAndHashes: our initiator authenticates to our target over
// NVMe/TCP with every DH group and every hash, one- and two-way, on the
// admin queue and the I/O queues, and the queues then carry I/O.
func TestAuthGroupsAndHashes(t *testing.T) {
	type combo struct {
		hash, group string
		bidi        bool
	}
	var combos []combo
	for _, g := range []string{"null", "ffdhe2048", "ffdhe3072", "ffdhe4096", "ffdhe6144", "ffdhe8192"} {
		combos = append(combos, combo{"sha256", g, false})
	}
	for _, h := range []string{"sha256", "sha384", "sha512"} {
		combos = append(combos, combo{h, "null", true})
	}
	combos = append(combos, combo{"sha512", "ffdhe2048", true})
	for _, c := range combos {
		hk, ck := secret(t, 1), ""
		if c.bidi {
			ck = secret(t, 3)
		}
		f := keyed(t, hk, ck, c.hash, c.group)
		o := f.options(t)
		o.IOQueues, o.DHCHAPSecret, o.DHCHAPCtrlSecret = 2, hk, ck
		d := open(t, o)
		roundTrip(t, d)
		d.Close()
	}
}

// TestAuthRefused: a wrong host secret, a missing one and a wrong
// controller secret all fail Open with ErrAuth, saying which host and what
// to check; nothing was written.
func TestAuthRefused(t *testing.T) {
	hk, ck := secret(t, 1), secret(t, 2)
	f := keyed(t, hk, ck, "sha256", "ffdhe2048")
	tests := []struct{ name, host, ctrl, want string }{
		{"wrong host secret", secret(t, 1), "", "authentication failed (peer reason 1: failure message); check that " +
			"--dhchap-secret-file holds the secret the target's --host-keys file gives " + testHost},
		{"no secret", "", "", "subsystem " + testNQN + " requires in-band authentication (DH-HMAC-CHAP) from host " +
			testHost + " and no secret is set: pass this host's secret with --dhchap-secret-file"},
		{"wrong controller secret", hk, secret(t, 2), "wrong controller secret); check that --dhchap-secret-file"},
	}
	for _, tc := range tests {
		o := f.options(t)
		o.DHCHAPSecret, o.DHCHAPCtrlSecret = tc.host, tc.ctrl
		d, err := Open(context.Background(), o)
		if err == nil {
			d.Close()
		}
		if !errors.Is(err, ErrAuth) || !errors.Is(err, blockdev.ErrInvalid) {
			t.Errorf("%s: %v, want ErrAuth", tc.name, err)
		}
		if err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error lacks %q: %v", tc.name, tc.want, err)
		}
	}
	o := f.options(t)
	o.DHCHAPSecret, o.DHCHAPCtrlSecret = hk, ck
	d := open(t, o)
	defer d.Close()
	roundTrip(t, d)
}

// BenchmarkAuthConnect is the cost of bringing a device up (admin queue
// and one I/O queue, each authenticated) without keys and with
// DH-HMAC-CHAP in each group; subtract "none" and halve for one queue.
func BenchmarkAuthConnect(b *testing.B) {
	for _, g := range []string{"none", "null", "ffdhe2048", "ffdhe4096", "ffdhe8192"} {
		b.Run(g, func(b *testing.B) {
			hk := secret(b, 1)
			f := newFixture(b, 1, 1<<20, func(c *target.Config) {
				if g != "none" {
					c.Subsystems[0].HostKeys = []target.HostKey{{HostNQN: testHost, Secret: hk, Hashes: []string{"sha256"}, DHGroups: []string{g}}}
				}
			})
			o := f.options(b)
			o.IOQueues, o.Logf = 1, nil
			if g != "none" {
				o.DHCHAPSecret = hk
			}
			b.ResetTimer()
			for range b.N {
				d, err := Open(context.Background(), o)
				if err != nil {
					b.Fatal(err)
				}
				d.Close()
			}
		})
	}
}
