package tlspsk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// OpenSSL 3 is the independent peer: its s_server and s_client take an
// external PSK for TLS 1.3 (-psk HEX -psk_identity ID). Its apps build a
// SHA-256 PSK session from -psk, so these tests use TLS_AES_128_GCM_SHA256.

func needOpenSSL(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed (Debian package openssl): no independent TLS peer")
	}
	return path
}

// startSServer runs openssl s_server in -rev mode (it answers each line
// reversed) with the given PSK and identity and returns its address.
func startSServer(t *testing.T, psk []byte, identity string) string {
	openssl := needOpenSSL(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, openssl, "s_server", "-nocert", "-tls1_3", "-psk", hex.EncodeToString(psk),
		"-psk_identity", identity, "-ciphersuites", "TLS_AES_128_GCM_SHA256", "-accept", "127.0.0.1:0", "-rev", "-naccept", "1")
	stdin, _ := cmd.StdinPipe() // s_server ends when its stdin does
	out, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		stdin.Close()
		cmd.Wait()
		t.Logf("s_server stderr: %s", stderr.String())
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "ACCEPT "); ok {
			go io.Copy(io.Discard, out)
			return addr
		}
	}
	t.Fatalf("s_server printed no ACCEPT line: %v", sc.Err())
	return ""
}

func TestClientAgainstOpenSSLServer(t *testing.T) {
	k := testKey(t, HashSHA256)
	cc := clientConfig(t, k, testHost, testSub)
	addr := startSServer(t, cc.PSK, cc.Identity)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Client(ctx, raw, cc)
	if err != nil {
		t.Fatalf("handshake with openssl s_server: %v", err)
	}
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("nvme over tls\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "slt revo emvn\n" {
		t.Fatalf("s_server answered %q, %v; want the line reversed", line, err)
	}
}

func TestClientRefusedByOpenSSLServer(t *testing.T) {
	k := testKey(t, HashSHA256)
	cc := clientConfig(t, k, testHost, testSub)
	for name, srv := range map[string]struct {
		psk      []byte
		identity string
	}{
		"wrong key":      {testKey(t, HashSHA256).Secret, cc.Identity},
		"wrong identity": {cc.PSK, Identity(suiteAES128, testHost, testSub+"x")},
	} {
		addr := startSServer(t, srv.psk, srv.identity)
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = Client(ctx, raw, cc)
		cancel()
		raw.Close()
		var ae *AlertError
		if !errors.As(err, &ae) || !ae.Remote {
			t.Fatalf("%s: %v, want an alert from s_server", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

func TestOpenSSLClientAgainstServer(t *testing.T) {
	k := testKey(t, HashSHA256)
	cc := clientConfig(t, k, testHost, testSub)
	for _, tc := range []struct {
		name string
		psk  []byte
		ok   bool
	}{{"right key", cc.PSK, true}, {"wrong key", testKey(t, HashSHA256).Secret, false}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			raw, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			defer raw.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := Server(ctx, raw, ServerConfig{Lookup: keyLookup(k, testHost)})
			if err != nil {
				done <- err
				return
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if err == nil && line != "ping\n" {
				err = errors.New("read " + line)
			}
			if err == nil {
				_, err = c.Write([]byte("pong\n"))
			}
			done <- err
			io.Copy(io.Discard, c)
		}()
		out, cerr := testutil.SClient(t, ln.Addr().String(), tc.psk, cc.Identity, []byte("ping\n"),
			func(out []byte) bool { return bytes.Contains(out, []byte("pong\n")) })
		serr := <-done
		ln.Close()
		if tc.ok && (serr != nil || !bytes.Contains(out, []byte("pong\n"))) {
			t.Fatalf("%s: server %v; s_client printed %q (%v)", tc.name, serr, out, cerr)
		}
		var ae *AlertError
		if !tc.ok && (!errors.As(serr, &ae) || ae.Alert != alertDecryptError || cerr == nil) {
			t.Fatalf("%s: server %v, s_client %v: want decrypt_error sent and s_client failing", tc.name, serr, cerr)
		}
	}
}
