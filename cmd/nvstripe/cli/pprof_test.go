package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Every daemon refuses a --pprof address that is not loopback before it
// starts anything (no etcd runs here), and says how to override.
func TestPprofRefusesOtherAddresses(t *testing.T) {
	dir := t.TempDir()
	daemons := [][]string{
		{"target", "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--nqn", "nqn.2026-12.io.nvstripe:pprof", "--ns", "d0:1MiB", "--allow-host", "any"},
		{"map", "v", "--nbd-listen", "127.0.0.1:0"},
		{"agent", "--socket", dir + "/agent.sock", "--state-dir", dir},
		{"controller"},
		{"csi", "--endpoint", "unix://" + dir + "/csi.sock", "--node-id", "n"},
	}
	for _, args := range daemons {
		_, _, err := run(t, append(args, "--pprof", "0.0.0.0:0", "--etcd", "127.0.0.1:1", "--timeout", "1s")...)
		if ExitCode(err) != 2 || !strings.Contains(err.Error(), "not a loopback address") || !strings.Contains(err.Error(), "--pprof-any") {
			t.Errorf("%s --pprof 0.0.0.0:0: exit %d, %v; want a usage error naming --pprof-any", args[0], ExitCode(err), err)
		}
	}
}

// target serve --pprof 127.0.0.1:0 logs where it serves the profiles, and
// serves this process's.
func TestPprofServesTargetProfiles(t *testing.T) {
	// The deadline only ends a target that never logs the line (then the
	// scan below ends with the target's output).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"target", "serve", "--dir", t.TempDir(), "--listen", "127.0.0.1:0",
			"--nqn", "nqn.2026-12.io.nvstripe:pprof", "--ns", "d0:1MiB", "--allow-host", "any", "--pprof", "127.0.0.1:0"}, io.Discard, pw)
		pw.Close()
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("target serve: %v", err)
		}
	}()
	url := ""
	sc := bufio.NewScanner(pr)
	for url == "" && sc.Scan() {
		if _, u, ok := strings.Cut(sc.Text(), " url="); ok && strings.Contains(sc.Text(), "serving runtime profiles") {
			url = u
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		t.Fatal("target serve did not log where it serves profiles")
	}
	resp, err := http.Get(url + "goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("GET %sgoroutine: %s\n%.300s", url, resp.Status, body)
	}
}
