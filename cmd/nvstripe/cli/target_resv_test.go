package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/initiator"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

const resvNQN = "nqn.2026-12.io.nvstripe:resv"

// serveTarget runs `target serve` over dir until the returned stop is
// called, and returns its listener address.
func serveTarget(t *testing.T, dir string) (addr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"target", "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--nqn", resvNQN,
			"--ns", "d0:1MiB", "--allow-host", "any"}, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "listener 0: "); ok {
			addr = a
		}
		if sc.Text() == "ready" {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if addr == "" {
		cancel()
		t.Fatalf("target serve did not get ready: %v", <-done)
	}
	return addr, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("target serve: %v", err)
		}
	}
}

func openAs(t *testing.T, addr string, id byte) *initiator.Device {
	t.Helper()
	d, err := initiator.Open(context.Background(), initiator.Options{SubsysNQN: resvNQN, Paths: []string{addr},
		HostID: [16]byte{0: 0x77, 15: id}, IOQueues: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestTargetServeKeepsReservations: `target serve` keeps each namespace's
// reservations in DIR/NAME.resv, so a restarted target still fences the
// writer it fenced.
func TestTargetServeKeepsReservations(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	addr, stop := serveTarget(t, dir)
	old, owner := openAs(t, addr, 1), openAs(t, addr, 2)
	if err := old.TakeOver(ctx, 100, 0); err != nil {
		t.Fatal(err)
	}
	if err := owner.TakeOver(ctx, 101, 100); err != nil {
		t.Fatal(err)
	}
	old.Close()
	owner.Close()
	stop()

	addr, stop = serveTarget(t, dir)
	defer stop()
	old, owner = openAs(t, addr, 1), openAs(t, addr, 2)
	if err := old.WriteAt(ctx, make([]byte, 4096), 0); !errors.Is(err, blockdev.ErrFenced) {
		t.Fatalf("fenced writer after the restart: %v, want ErrFenced", err)
	}
	if err := owner.WriteAt(ctx, make([]byte, 4096), 0); err != nil {
		t.Fatalf("owner after the restart: %v", err)
	}
	st, err := owner.Report(ctx)
	if err != nil || !st.PTPL || st.Type != pdu.ResvWriteExclusiveAllRegs || st.Count != 1 || st.Registrants[0].Key != 101 {
		t.Fatalf("report after the restart: %+v, %v", st, err)
	}
}
