package identity

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const (
	cliNQN = "nqn.2014-08.org.nvmexpress:uuid:2b7e1f0c-5a3d-4f6e-9c1b-0d2e3f4a5b6c"
	cliID  = "11111111-2222-4333-8444-555555555555"
	ownNQN = "nqn.2026-01.io.example:node7"
)

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name          string
		nvme, store   map[string]string // files present before
		wantNQN       string            // "" : generated (UUID form)
		wantID        string            // "" : generated
		idFromNQN     bool              // the ID is the NQN's UUID
		wantStored    []string          // files Load writes to the store
		wantErr       error
		wantErrSubstr string
	}{
		{name: "nvme-cli files", nvme: map[string]string{NQNFile: cliNQN + "\n", IDFile: cliID + "\n"}, wantNQN: cliNQN, wantID: cliID},
		{name: "nvme-cli NQN only, UUID form", nvme: map[string]string{NQNFile: cliNQN}, wantNQN: cliNQN, wantID: "2b7e1f0c-5a3d-4f6e-9c1b-0d2e3f4a5b6c"},
		{name: "nvme-cli NQN only, other form", nvme: map[string]string{NQNFile: ownNQN}, wantNQN: ownNQN, wantStored: []string{IDFile}},
		{name: "nvme-cli wins over the store", nvme: map[string]string{NQNFile: cliNQN, IDFile: cliID}, store: map[string]string{NQNFile: ownNQN}, wantNQN: cliNQN, wantID: cliID},
		{name: "stored", store: map[string]string{NQNFile: ownNQN, IDFile: cliID}, wantNQN: ownNQN, wantID: cliID},
		{name: "nothing: generated", idFromNQN: true, wantStored: []string{NQNFile, IDFile}},
		{name: "bad NQN", nvme: map[string]string{NQNFile: "host 1"}, wantErr: ErrInvalid, wantErrSubstr: "hostnqn"},
		{name: "bad ID", store: map[string]string{IDFile: "1234"}, wantErr: ErrInvalid, wantErrSubstr: "hostid"},
		{name: "long NQN", nvme: map[string]string{NQNFile: "nqn." + strings.Repeat("x", 220)}, wantErr: ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Dirs{NVMe: filepath.Join(t.TempDir(), "nvme"), Store: filepath.Join(t.TempDir(), "nvstripe")}
			for n, c := range tc.nvme {
				write(t, d.NVMe, n, c)
			}
			for n, c := range tc.store {
				write(t, d.Store, n, c)
			}
			h, err := Load(d)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantErrSubstr) {
					t.Fatalf("err %v, want %v naming %q", err, tc.wantErr, tc.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantNQN != "" && h.NQN != tc.wantNQN {
				t.Errorf("NQN %q, want %q", h.NQN, tc.wantNQN)
			}
			if tc.wantNQN == "" && !strings.HasPrefix(h.NQN, UUIDPrefix) {
				t.Errorf("generated NQN %q is not in UUID form", h.NQN)
			}
			if tc.wantID != "" && FormatUUID(h.ID) != tc.wantID {
				t.Errorf("ID %s, want %s", FormatUUID(h.ID), tc.wantID)
			}
			if tc.idFromNQN && h.NQN != UUIDPrefix+FormatUUID(h.ID) {
				t.Errorf("generated NQN %q does not carry the ID %s", h.NQN, FormatUUID(h.ID))
			}
			for _, n := range []string{NQNFile, IDFile} {
				_, statErr := os.Stat(filepath.Join(d.Store, n))
				stored := tc.store[n] != "" || contains(tc.wantStored, n)
				if (statErr == nil) != stored {
					t.Errorf("store/%s exists: %t, want %t", n, statErr == nil, stored)
				}
			}
			again, err := Load(d)
			if err != nil || again != h {
				t.Errorf("second Load: %+v %v, want %+v", again, err, h)
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestLoadRace: processes starting together on a fresh node agree.
func TestLoadRace(t *testing.T) {
	d := Dirs{Store: filepath.Join(t.TempDir(), "nvstripe")}
	hosts := make([]Host, 8)
	var wg sync.WaitGroup
	for i := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if hosts[i], err = Load(d); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, h := range hosts {
		if h != hosts[0] {
			t.Fatalf("Load %d got %+v, Load 0 %+v", i, h, hosts[0])
		}
	}
	if left, _ := filepath.Glob(filepath.Join(d.Store, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestNoStore(t *testing.T) {
	if _, err := Load(Dirs{NVMe: t.TempDir()}); err == nil {
		t.Fatal("nothing found and no store: no error")
	}
}

func TestUUID(t *testing.T) {
	for _, bad := range []string{"", "11111111222243338444555555555555", "1111111-12222-4333-8444-555555555555", "zzzzzzzz-2222-4333-8444-555555555555"} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("ParseUUID(%q): no error", bad)
		}
	}
	u, err := ParseUUID(strings.ToUpper(cliID))
	if err != nil || FormatUUID(u) != cliID {
		t.Fatalf("round trip: %s %v", FormatUUID(u), err)
	}
}
