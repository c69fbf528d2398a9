package nbd

// Interoperability with real NBD clients: libnbd's nbdinfo, nbdcopy and
// nbdsh, qemu-img and qemu-io, fio's nbd engine, and tshark's NBD dissector.
// Each test skips, saying so, only when its tool is not installed.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// need skips t when a tool is missing and returns its path.
func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s not installed (apt-get install libnbd-bin python3-libnbd qemu-utils fio tshark): %v", tool, err)
	}
	return p
}

// run runs a tool with a deadline and returns its combined output; any
// failure fails the test.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := runErr(t, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// nbdsh needs Debian's python (python3-libnbd), not a pyenv one.
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/usr/sbin:"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func uri(addr, export string) string { return "nbd://" + addr + "/" + export }

func TestNbdinfo(t *testing.T) {
	need(t, "nbdinfo")
	rw, ro := newMem(t, 64<<20, 4096), newMem(t, 1<<20, 512)
	_, addr := serve(t, Options{Exports: map[string]Export{
		"rw": {Device: rw, Description: "a volume"},
		"ro": {Device: ro, ReadOnly: true},
	}}, "tcp")
	var info struct {
		Protocol   string `json:"protocol"`
		Structured bool   `json:"structured"`
		Exports    []struct {
			Name         string   `json:"export-name"`
			Description  string   `json:"description"`
			Size         int64    `json:"export-size"`
			Contexts     []string `json:"contexts"`
			ReadOnly     bool     `json:"is_read_only"`
			CanFlush     bool     `json:"can_flush"`
			CanFUA       bool     `json:"can_fua"`
			CanTrim      bool     `json:"can_trim"`
			CanZero      bool     `json:"can_zero"`
			CanFastZero  bool     `json:"can_fast_zero"`
			CanMultiConn bool     `json:"can_multi_conn"`
			CanCache     bool     `json:"can_cache"`
			CanDF        bool     `json:"can_df"`
			MinBlock     int      `json:"block_size_minimum"`
			PrefBlock    int      `json:"block_size_preferred"`
			MaxBlock     int      `json:"block_size_maximum"`
		} `json:"exports"`
	}
	out := run(t, "nbdinfo", "--json", uri(addr, "rw"))
	mustf(t, json.Unmarshal([]byte(out), &info), "nbdinfo json %s", out)
	e := info.Exports[0]
	if info.Protocol != "newstyle-fixed" || !info.Structured || e.Name != "rw" || e.Description != "a volume" || e.Size != 64<<20 {
		t.Fatalf("nbdinfo: %s", out)
	}
	if e.ReadOnly || !e.CanFlush || !e.CanFUA || !e.CanTrim || !e.CanZero || !e.CanFastZero || !e.CanMultiConn || !e.CanCache || !e.CanDF {
		t.Fatalf("nbdinfo flags: %+v", e)
	}
	if e.MinBlock != 512 || e.PrefBlock != 4096 || e.MaxBlock != DefaultMaxRequest || len(e.Contexts) != 1 || e.Contexts[0] != "base:allocation" {
		t.Fatalf("nbdinfo block sizes / contexts: %+v", e)
	}
	out = run(t, "nbdinfo", "--json", uri(addr, "ro"))
	mustf(t, json.Unmarshal([]byte(out), &info), "nbdinfo json %s", out)
	if e := info.Exports[0]; !e.ReadOnly || e.CanTrim || e.CanZero || e.Size != 1<<20 {
		t.Fatalf("read-only export: %+v", e)
	}
	out = run(t, "nbdinfo", "--list", "--json", "nbd://"+addr)
	mustf(t, json.Unmarshal([]byte(out), &info), "nbdinfo --list json %s", out)
	if len(info.Exports) != 2 || info.Exports[0].Name != "ro" || info.Exports[1].Name != "rw" {
		t.Fatalf("nbdinfo --list: %s", out)
	}
}

// writeRandom writes n bytes of seeded random data to a new file and
// returns its path and SHA-256.
func writeRandom(t *testing.T, n int64, seed uint64) (string, [32]byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "random.img")
	f, err := os.Create(path)
	mustf(t, err, "create")
	defer f.Close()
	h := sha256.New()
	rng := rand.NewChaCha8([32]byte{byte(seed)})
	buf := make([]byte, 4<<20)
	for done := int64(0); done < n; done += int64(len(buf)) {
		rng.Read(buf)
		h.Write(buf)
		_, err := f.Write(buf)
		mustf(t, err, "write")
	}
	return path, [32]byte(h.Sum(nil))
}

// nbdcopy writes 1 GiB of random data over 4 connections into a sparse Mem
// and reads it back identical.
func TestNbdcopy(t *testing.T) {
	need(t, "nbdcopy")
	size := int64(1 << 30)
	if testing.Short() {
		size = 128 << 20
	}
	m, addr := serveMem(t, size, 4096)
	src, sum := writeRandom(t, size, 1)
	run(t, "nbdcopy", "--connections", "4", "--flush", src, uri(addr, "mem"))
	cmd := exec.CommandContext(t.Context(), "nbdcopy", "--connections", "4", uri(addr, "mem"), "-")
	out := testutil.StartStdout(t, cmd)
	h := sha256.New()
	n, err := io.Copy(h, out)
	mustf(t, err, "read back")
	mustf(t, cmd.Wait(), "nbdcopy read")
	if n != size || [32]byte(h.Sum(nil)) != sum {
		t.Fatalf("read back %d bytes with a different SHA-256", n)
	}
	// The device itself holds the data (not just a round trip).
	p := make([]byte, 4096)
	mustf(t, m.ReadAt(t.Context(), p, size-4096), "read")
	f, err := os.Open(src)
	mustf(t, err, "open")
	defer f.Close()
	q := make([]byte, 4096)
	_, err = f.ReadAt(q, size-4096)
	mustf(t, err, "read")
	if !bytes.Equal(p, q) {
		t.Fatal("last block differs on the device")
	}
}

// sparseImage writes a raw image with data at a few places and holes
// elsewhere.
func sparseImage(t *testing.T, size int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "src.raw")
	f, err := os.Create(path)
	mustf(t, err, "create")
	defer f.Close()
	mustf(t, f.Truncate(size), "truncate")
	for i, off := range []int64{0, 3<<20 + 512, size / 2, size - 64<<10} {
		_, err := f.WriteAt(testutil.Pattern(64<<10, byte(i+1)), off)
		mustf(t, err, "write")
	}
	return path
}

// qemu-img convert into the export, then qemu-img compare.
func TestQemuImg(t *testing.T) {
	need(t, "qemu-img")
	const size = 32 << 20
	m, addr := serveMem(t, size, 4096)
	src := sparseImage(t, size)
	u := uri(addr, "mem")
	run(t, "qemu-img", "convert", "-n", "-f", "raw", "-O", "raw", src, u)
	out := run(t, "qemu-img", "compare", "-f", "raw", "-F", "raw", src, u)
	if !strings.Contains(out, "Images are identical") {
		t.Fatalf("qemu-img compare: %s", out)
	}
	// The comparison can fail: change one byte behind qemu's back.
	mustf(t, m.WriteAt(t.Context(), testutil.Pattern(4096, 99), size/2), "write")
	if out, err := runErr(t, "qemu-img", "compare", "-f", "raw", "-F", "raw", src, u); err == nil {
		t.Fatalf("qemu-img compare missed a difference: %s", out)
	}
	out = run(t, "qemu-img", "map", "--output=json", "-f", "raw", u)
	if !strings.Contains(out, `"data": false`) || !strings.Contains(out, `"data": true`) {
		t.Fatalf("qemu-img map shows no holes and data: %s", out)
	}
}

// qemu-io pattern writes and reads at 512-aligned offsets that are not
// aligned to the device's 4096-byte blocks.
func TestQemuIO(t *testing.T) {
	need(t, "qemu-io")
	m, addr := serveMem(t, 4<<20, 4096)
	args := []string{"-f", "raw", uri(addr, "mem")}
	for _, c := range []string{
		"write -P 0xab 512 1536",
		"write -P 0xcd 4608 8192",
		"write -P 0xef 1048064 1024",
		"write -z 6144 1024",
		"read -P 0xab 512 1536",
		"read -P 0 0 512",
		"read -P 0 2048 2560",
		"read -P 0xcd 4608 1536",
		"read -P 0 6144 1024",
		"read -P 0xcd 7168 5632",
		"read -P 0xef 1048064 1024",
		"read -P 0 1049088 3072",
		"flush",
	} {
		args = append(args, "-c", c)
	}
	out := run(t, "qemu-io", args...)
	if strings.Contains(out, "Pattern verification failed") || strings.Contains(out, "error") {
		t.Fatalf("qemu-io: %s", out)
	}
	got := make([]byte, 4096)
	mustf(t, m.ReadAt(t.Context(), got, 4096), "read")
	want := make([]byte, 4096)
	copy(want[512:], bytes.Repeat([]byte{0xcd}, 1536))
	copy(want[3072:], bytes.Repeat([]byte{0xcd}, 1024))
	if !bytes.Equal(got, want) {
		t.Fatalf("device block 1 holds %x...", got[:32])
	}
	// A failing pattern check is reported (the test can fail).
	if out, _ := runErr(t, "qemu-io", "-f", "raw", uri(addr, "mem"), "-c", "read -P 0x11 512 512"); !strings.Contains(out, "Pattern verification failed") {
		t.Fatalf("qemu-io did not notice a wrong pattern: %s", out)
	}
}

// nbdsh (libnbd from Python): trim, write zeroes (with and without
// FAST_ZERO), block status and flush.
func TestNbdsh(t *testing.T) {
	need(t, "nbdsh")
	const mib = 1 << 20
	_, addr := serveMem(t, 8*mib, 4096)
	script := `
import errno
M = 1 << 20
assert h.can_trim() and h.can_zero() and h.can_fast_zero() and h.can_flush() and h.can_multi_conn()
h.pwrite(b"\xaa" * (4 * M), 0)
h.trim(M, M)
assert h.pread(M, M) == bytes(M), "trim did not zero"
h.zero(8192, 4096, nbd.CMD_FLAG_NO_HOLE)
assert h.pread(8192, 4096) == bytes(8192)
assert h.pread(4096, 0) == b"\xaa" * 4096
try:
    h.zero(M, 2 * M, nbd.CMD_FLAG_FAST_ZERO)
    raise AssertionError("FAST_ZERO succeeded on a device that cannot zero fast")
except nbd.Error as e:
    assert e.errnum == errno.ENOTSUP, e
ext = []
def cb(ctx, off, entries, err):
    assert ctx == "base:allocation"
    ext.extend(zip(entries[0::2], entries[1::2]))
    return 0
h.block_status(8 * M, 0, cb)
assert ext == [(M, 0), (M, 3), (2 * M, 0), (4 * M, 3)], ext
h.flush()
h.pwrite(b"\x55" * 512, 7 * M + 512, nbd.CMD_FLAG_FUA)
assert h.pread(1024, 7 * M) == bytes(512) + b"\x55" * 512
print("nbdsh ok")
`
	out := run(t, "nbdsh", "--base-allocation", "-u", uri(addr, "mem"), "-c", script)
	if !strings.Contains(out, "nbdsh ok") {
		t.Fatalf("nbdsh: %s", out)
	}
}

// fio with the nbd engine writes random blocks and verifies them (crc32c).
func TestFioVerify(t *testing.T) {
	need(t, "fio")
	_, addr := serveMem(t, 64<<20, 4096)
	for _, rw := range []string{"randwrite", "write"} {
		out := run(t, "fio", "--name=verify", "--ioengine=nbd", "--uri="+uri(addr, "mem"),
			"--rw="+rw, "--bsrange=4k-256k", "--iodepth=16", "--size=32M", "--verify=crc32c",
			"--do_verify=1", "--verify_fatal=1", "--norandommap", "--randrepeat=0",
			"--verify_state_save=0")
		if !strings.Contains(out, "err= 0") {
			t.Fatalf("fio %s: %s", rw, out)
		}
	}
}

// A whole session through tshark's NBD dissector: no malformed packets and
// no error-level expert info.
func TestTsharkWire(t *testing.T) {
	tshark := need(t, "tshark")
	need(t, "nbdsh")
	m := newMem(t, 16<<20, 4096)
	mustf(t, m.WriteAt(t.Context(), testutil.Pattern(1<<20, 4), 2<<20), "write")
	_, addr := serve(t, Options{Exports: map[string]Export{"mem": {Device: m, Description: "wire"}}}, "tcp")
	port := addr[strings.LastIndex(addr, ":")+1:]
	pcap := filepath.Join(t.TempDir(), "nbd.pcap")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	capture := exec.CommandContext(ctx, tshark, "-i", "lo", "-B", "64", "-f", "tcp port "+port, "-w", pcap)
	stderr, err := capture.StderrPipe()
	mustf(t, err, "tshark stderr")
	mustf(t, capture.Start(), "tshark")
	ready := make(chan string, 1)
	go func() { // report the line saying capture started, then drain
		sc := bufio.NewScanner(stderr)
		var seen []string
		for sc.Scan() && !strings.Contains(sc.Text(), "Capturing on") {
			seen = append(seen, sc.Text())
		}
		if sc.Err() == nil && strings.Contains(sc.Text(), "Capturing on") {
			ready <- ""
		} else {
			ready <- strings.Join(seen, "\n")
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case msg := <-ready:
		if msg != "" {
			t.Skipf("tshark cannot capture on lo here: %s", msg)
		}
	case <-time.After(30 * time.Second):
		t.Skip("tshark did not start capturing on lo within 30 s")
	}
	script := `
for i in range(4):
    h.pwrite(b"\x01" * 8192, 4096 * (i + 1))
    h.pread(16384, (2 << 20) - 8192 * i)
h.trim(1 << 20, 8 << 20)
h.zero(65536, 12 << 20)
h.flush()
try:
    h.pread(4096, 16 << 20)
except nbd.Error:
    pass
if h.can_meta_context("base:allocation"):
    h.block_status(16 << 20, 0, lambda *a: 0)
`
	// Once with structured replies, once with simple replies only (the
	// replies the kernel client gets).
	run(t, "nbdsh", "--base-allocation", "-u", uri(addr, "mem"), "-c", script)
	run(t, "nbdsh", "-c", "h.set_request_structured_replies(False)", "-c", fmt.Sprintf("h.connect_uri(%q)", uri(addr, "mem")), "-c", script)
	time.Sleep(500 * time.Millisecond)
	capture.Process.Signal(os.Interrupt)
	capture.Wait()
	// Newer tshark decodes the whole protocol by port; 4.0 only has a
	// heuristic dissector for the transmission phase, enabled by default.
	decodeAs := []string{"-d", "tcp.port==" + port + ",nbd"}
	if out, _ := runErr(t, tshark, append([]string{"-r", pcap, "-c", "1"}, decodeAs...)...); strings.Contains(out, "isn't valid for layer type") {
		t.Logf("tshark has no NBD decode-as by port; using its heuristic NBD dissector")
		decodeAs = nil
	}
	decode := func(filter string) string {
		return run(t, tshark, append([]string{"-r", pcap, "-Y", filter}, decodeAs...)...)
	}
	if bad := decode("_ws.malformed || _ws.expert.severity >= error"); strings.Contains(bad, "NBD") || strings.Contains(bad, "Malformed") {
		t.Fatalf("tshark reports malformed NBD packets:\n%s", bad)
	}
	replies := strings.Count(decode("nbd.type == 0 && nbd.error == 0 && nbd.magic == 0x67446698"), "\n")
	requests := strings.Count(decode("nbd.magic == 0x25609513"), "\n")
	// The 4.0 heuristic dissector recognises a message only at the start of
	// a TCP segment, so how many it decodes depends on how the kernel
	// segmented the batched writes: demand some of each, not a count.
	if requests < 1 || replies < 1 {
		t.Fatalf("tshark decoded %d NBD requests and %d simple READ replies", requests, replies)
	}
}
