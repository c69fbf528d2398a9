package ublk

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

// TestStartWithoutDriver: where the ublk driver is not loaded (this
// development host, CI), Start fails at once with ErrNoDriver.
func TestStartWithoutDriver(t *testing.T) {
	if _, err := os.Stat(ControlPath); err == nil {
		t.Skip(ControlPath + " exists: the driver is loaded (the VM tests cover it)")
	}
	mem, _ := blockdev.NewMem(1<<20, 4096)
	s, err := Start(context.Background(), mem, nil)
	if !errors.Is(err, ErrNoDriver) || s != nil {
		t.Fatalf("Start without the driver: %v, want ErrNoDriver", err)
	}
	if err := Available(); !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Available: %v", err)
	}
	if err := Delete(0); !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := Recover(context.Background(), 0, mem, nil); !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Recover: %v", err)
	}
}
