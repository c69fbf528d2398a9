package testutil

import (
	"bytes"
	"context"
	"encoding/hex"
	"os/exec"
	"testing"
	"time"
)

// SClient runs openssl s_client against addr as a TLS 1.3 client with an
// external PSK and identity (TLS_AES_128_GCM_SHA256: openssl's apps build
// a SHA-256 PSK session from -psk), writes send, and reads what it prints
// until done holds for it or s_client ends; 20 seconds bound a hang. It
// returns the output and s_client's exit error and logs its stderr. A
// test skips where openssl is not installed.
func SClient(t testing.TB, addr string, psk []byte, identity string, send []byte, done func(out []byte) bool) ([]byte, error) {
	t.Helper()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed (Debian package openssl): no independent TLS client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, openssl, "s_client", "-connect", addr, "-tls1_3", "-psk", hex.EncodeToString(psk),
		"-psk_identity", identity, "-ciphersuites", "TLS_AES_128_GCM_SHA256", "-quiet", "-no_ign_eof")
	// s_client ends when its stdin does, so stdin stays open until the
	// reading is done. (The pipes fail only on a started command.)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdin.Write(send)
	var out []byte
	buf := make([]byte, 4096)
	for !done(out) {
		n, err := stdout.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			break
		}
	}
	stdin.Close()
	err = cmd.Wait()
	t.Logf("s_client stderr: %s", stderr.String())
	return out, err
}
