package initiator

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/target"
)

// TestWireCheck captures the initiator's traffic (bring-up, in-capsule and
// R2T writes, reads, flush, write zeroes, deallocate, keep-alive,
// discovery; with and without digests) and has Wireshark's nvme-tcp
// dissector check it: any malformed packet or NVMe/TCP expert warning
// fails the test.
func TestWireCheck(t *testing.T) {
	f := newFixture(t, 1, 4<<20, func(c *target.Config) { c.InCapsuleDataSize = 8192 })
	_, port, _ := net.SplitHostPort(f.addrs[0])
	file := filepath.Join(t.TempDir(), "nvme.pcapng")
	stop := testutil.CaptureLo(t, port, file)

	for _, dg := range []bool{false, true} {
		o := f.options(t)
		o.IOQueues, o.HeaderDigest, o.DataDigest = 2, dg, dg
		d := open(t, o)
		ctx := context.Background()
		for _, n := range []int{4096, 8192, 65536} {
			p := bytes.Repeat([]byte{byte(n >> 12)}, n)
			if err := d.WriteAt(ctx, p, 0); err != nil {
				t.Fatal(err)
			}
			if err := d.ReadAt(ctx, p, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := d.WriteZeroes(ctx, 0, 8192); err != nil {
			t.Fatal(err)
		}
		if err := d.Trim(ctx, 8192, 8192); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	if _, err := Discover(context.Background(), f.addrs[0], DiscoverOptions{HostNQN: testHost}); err != nil {
		t.Fatal(err)
	}
	stop()
	checkCapture(t, port, file)
}

// checkCapture runs tshark over file, decoding port as NVMe/TCP with
// digest verification on, and fails on malformed packets, NVMe/TCP expert
// warnings or errors (bad digests among them), or PDUs it could not make
// sense of; it also checks that every kind of PDU the test meant to send
// was seen.
func checkCapture(t *testing.T, port, file string) {
	tshark := func(filter string, fields ...string) []string {
		args := []string{"-r", file, "-d", "tcp.port==" + port + ",nvme-tcp",
			"-o", "nvme-tcp.check_hdgst:TRUE", "-o", "nvme-tcp.check_ddgst:TRUE", "-Y", filter, "-T", "fields"}
		for _, f := range append([]string{"frame.number"}, fields...) {
			args = append(args, "-e", f)
		}
		out, err := exec.Command("tshark", args...).Output()
		if err != nil {
			t.Fatalf("tshark -Y %q: %v", filter, err)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
		return lines
	}
	bad := tshark("_ws.malformed || nvme-tcp.unknown_data || (_ws.expert.severity >= warning && (nvme-tcp || nvme) && !tcp.analysis.flags)",
		"_ws.col.Info", "_ws.expert.message")
	if len(bad) > 0 {
		keep := filepath.Join(os.TempDir(), "nvstripe-initiator-wire.pcapng")
		if b, err := os.ReadFile(file); err == nil {
			_ = os.WriteFile(keep, b, 0o644)
		}
		t.Fatalf("wire check found problems (capture kept in %s):\n%s", keep, strings.Join(bad, "\n"))
	}
	for _, want := range []struct{ what, filter string }{
		{"ICReq", "nvme-tcp.type == 0"},
		{"in-capsule write", "nvme-tcp.type == 4 && nvme-tcp.pdo > 0"},
		{"R2T", "nvme-tcp.type == 9"},
		{"H2CData", "nvme-tcp.type == 6"},
		{"C2HData", "nvme-tcp.type == 7"},
		{"verified header digest", "nvme-tcp.hdgst.status == 1"},
		{"verified data digest", "nvme-tcp.ddgst.status == 1"},
	} {
		if len(tshark(want.filter)) == 0 {
			t.Errorf("no %s in the capture", want.what)
		}
	}
}
