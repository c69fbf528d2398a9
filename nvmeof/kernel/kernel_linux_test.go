package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

// fakeSysfs builds a sysfs tree the way Linux lays it out: a multipath
// subsystem with a head namespace (and hidden per-path nodes under the
// controllers), plus a controller without multipath that holds its
// namespace directly.
func fakeSysfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Subsystem 0 (native multipath): head nvme0n1 and nvme0n2, two controllers.
	write("class/nvme-subsystem/nvme-subsys0/subsysnqn", "nqn.2024-01.io.example:a\n")
	write("class/nvme-subsystem/nvme-subsys0/nvme0n1/nsid", "1\n")
	write("class/nvme-subsystem/nvme-subsys0/nvme0n1/uuid", "0b6e5e0c-6f1b-4c0a-9c3a-1f2e3d4c5b6a\n")
	write("class/nvme-subsystem/nvme-subsys0/nvme0n1/nguid", "0b6e5e0c-6f1b-4c0a-9c3a-1f2e3d4c5b6a\n")
	write("class/nvme-subsystem/nvme-subsys0/nvme0n2/nsid", "2\n")
	write("class/nvme-subsystem/nvme-subsys0/nvme0n2/uuid", "11111111-2222-3333-4444-555555555555\n")
	for _, c := range []string{"nvme0", "nvme1"} {
		write("class/nvme/"+c+"/subsysnqn", "nqn.2024-01.io.example:a\n")
		write("class/nvme/"+c+"/transport", "tcp\n")
		write("class/nvme/"+c+"/"+c[:4]+"0c"+c[4:]+"n1/nsid", "1\n") // hidden path node
	}
	// Controller nvme2 without multipath: namespace nvme2n1 below it.
	write("class/nvme/nvme2/subsysnqn", "nqn.2024-01.io.example:b\x00\n")
	write("class/nvme/nvme2/nvme2n1/nsid", "7\n")
	write("class/nvme/nvme2/nvme2n1/nguid", "AABBCCDDEEFF00112233445566778899\n")
	write("class/nvme/nvme2/nvme2n1p1/partition", "1\n")
	return root
}

func TestListFakeSysfs(t *testing.T) {
	root := fakeSysfs(t)
	got, err := List(Options{SysfsRoot: root, DevRoot: "/devx"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Namespace{
		{Name: "nvme0n1", DevPath: "/devx/nvme0n1", SubsysNQN: "nqn.2024-01.io.example:a", NSID: 1,
			UUID: "0b6e5e0c-6f1b-4c0a-9c3a-1f2e3d4c5b6a", NGUID: "0b6e5e0c-6f1b-4c0a-9c3a-1f2e3d4c5b6a"},
		{Name: "nvme0n2", DevPath: "/devx/nvme0n2", SubsysNQN: "nqn.2024-01.io.example:a", NSID: 2,
			UUID: "11111111-2222-3333-4444-555555555555"},
		{Name: "nvme2n1", DevPath: "/devx/nvme2n1", SubsysNQN: "nqn.2024-01.io.example:b", NSID: 7,
			NGUID: "AABBCCDDEEFF00112233445566778899"},
	}
	if len(got) != len(want) {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("List[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestFind(t *testing.T) {
	opts := Options{SysfsRoot: fakeSysfs(t), DevRoot: "/dev"}
	ns, err := Find(opts, "nqn.2024-01.io.example:b", 7)
	if err != nil || ns.DevPath != "/dev/nvme2n1" {
		t.Fatalf("Find b/7 = %+v, %v", ns, err)
	}
	ns, err = FindUUID(opts, "11111111222233334444555555555555")
	if err != nil || ns.Name != "nvme0n2" {
		t.Fatalf("FindUUID without dashes = %+v, %v", ns, err)
	}
	ns, err = FindUUID(opts, "aabbccdd-eeff-0011-2233-445566778899")
	if err != nil || ns.Name != "nvme2n1" {
		t.Fatalf("FindUUID by NGUID = %+v, %v", ns, err)
	}
	_, err = Find(opts, "nqn.2024-01.io.example:a", 9)
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("Find missing nsid: err = %v, want ErrNotFound+ErrUnavailable", err)
	}
	if _, err := FindUUID(opts, " - "); !errors.Is(err, blockdev.ErrInvalid) {
		t.Fatalf("FindUUID empty: err = %v, want ErrInvalid", err)
	}
}

func TestNoNVMeClass(t *testing.T) {
	opts := Options{SysfsRoot: t.TempDir()}
	_, err := List(opts)
	if !errors.Is(err, ErrNoNVMe) || !errors.Is(err, blockdev.ErrUnavailable) {
		t.Fatalf("List without class/nvme: err = %v", err)
	}
	if _, err := Open(opts, "nqn.x", 1); !errors.Is(err, ErrNoNVMe) {
		t.Fatalf("Open without class/nvme: err = %v", err)
	}
}

func TestBadNSID(t *testing.T) {
	root := fakeSysfs(t)
	if err := os.WriteFile(filepath.Join(root, "class/nvme/nvme2/nvme2n1/nsid"), []byte("zero\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := List(Options{SysfsRoot: root}); err == nil {
		t.Fatal("List with a malformed nsid succeeded")
	}
}
