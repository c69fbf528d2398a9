package nbd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
)

// nlattr builds one netlink attribute by hand: length (native endian, 2),
// type (2), payload, padding to 4 bytes.
func nlattr(typ uint16, payload []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(4+len(payload)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }

func concat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// The attributes of NBD_CMD_CONNECT, byte for byte, as
// include/uapi/linux/nbd-netlink.h lays them out.
func TestEncodeConnect(t *testing.T) {
	const nested = 0x8000 // NLA_F_NESTED
	got, err := encodeConnect(connectRequest{
		index: 3, size: 1 << 30, blockSize: 4096, flags: 0x15d, fds: []int{7, 8},
		timeout: 30 * time.Second, deadConn: 1500 * time.Millisecond, backendID: "vol",
		clientFlag: clientFlagDisconnectOnClose,
	})
	mustf(t, err, "encode")
	item := func(fd uint32) []byte { return nlattr(attrSockItem|nested, nlattr(attrSockFD, u32(fd))) }
	want := concat(
		nlattr(attrIndex, u32(3)),
		nlattr(attrSizeBytes, u64(1<<30)),
		nlattr(attrBlockSizeBytes, u64(4096)),
		nlattr(attrServerFlags, u64(0x15d)),
		nlattr(attrClientFlags, u64(2)),
		nlattr(attrTimeout, u64(30)),
		nlattr(attrDeadConnTimeout, u64(2)), // rounded up to whole seconds
		nlattr(attrSockets|nested, concat(item(7), item(8))),
		nlattr(attrBackendID, []byte("vol\x00")),
	)
	if string(got) != string(want) {
		t.Fatalf("connect attributes\n got %x\nwant %x", got, want)
	}
	// The numbers the kernel header defines.
	if attrIndex != 1 || attrSizeBytes != 2 || attrSockets != 7 || attrDeadConnTimeout != 8 || attrBackendID != 10 || genlCmdConnect != 1 || genlCmdDisconnect != 2 {
		t.Fatal("netlink constants changed")
	}

	got, err = encodeConnect(connectRequest{index: -1, size: 512, blockSize: 512, fds: []int{4}})
	mustf(t, err, "encode")
	want = concat(nlattr(attrSizeBytes, u64(512)), nlattr(attrBlockSizeBytes, u64(512)),
		nlattr(attrServerFlags, u64(0)), nlattr(attrClientFlags, u64(0)),
		nlattr(attrSockets|nested, item(4)))
	if string(got) != string(want) {
		t.Fatalf("connect without index\n got %x\nwant %x", got, want)
	}
}

func TestEncodeDisconnectAndReply(t *testing.T) {
	got, err := encodeDisconnect(5)
	mustf(t, err, "encode")
	if want := nlattr(attrIndex, u32(5)); string(got) != string(want) {
		t.Fatalf("disconnect %x, want %x", got, want)
	}
	idx, err := decodeIndex(concat(nlattr(attrSizeBytes, u64(9)), nlattr(attrIndex, u32(12))))
	if err != nil || idx != 12 {
		t.Fatalf("decodeIndex = %d, %v", idx, err)
	}
	if _, err := decodeIndex(nlattr(attrSizeBytes, u64(9))); err == nil {
		t.Fatal("reply without index accepted")
	}
	if _, err := decodeIndex([]byte{1, 2, 3}); err == nil {
		t.Fatal("garbage accepted")
	}
}

func TestParseDevPath(t *testing.T) {
	for in, want := range map[string]int{"": -1, "/dev/nbd0": 0, "/dev/nbd15": 15} {
		if got, err := parseDevPath(in); err != nil || got != want {
			t.Errorf("%q: %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"/dev/sda", "/dev/nbd", "/dev/nbd-1", "nbd0", "/dev/nbdx"} {
		if _, err := parseDevPath(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Where the kernel has no nbd driver (as on the machines these tests run
// on), AttachKernel says so clearly and leaves nothing running.
func TestAttachWithoutModule(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("kernel attach is Linux-only")
	}
	if _, _, err := dialNBD(); err == nil {
		t.Skip("the nbd kernel module is loaded: attaching needs a real /dev/nbdN and root; not exercised here")
	} else if !errors.Is(err, ErrNoKernelNBD) {
		t.Skipf("generic netlink unavailable here (%v): cannot probe the nbd family", err)
	}
	s, _ := serve(t, Options{Exports: map[string]Export{"mem": {Device: newMem(t, 1<<20, 512)}}}, "tcp")
	_, err := s.AttachKernel(t.Context(), "mem", "/dev/nbd0", AttachOptions{})
	if !errors.Is(err, ErrNoKernelNBD) || err.Error() != "nbd kernel module not loaded (modprobe nbd); serve over --nbd-listen or --fuse instead" {
		t.Fatalf("AttachKernel without the module: %v", err)
	}
	if _, err := s.AttachKernel(t.Context(), "nope", "", AttachOptions{}); err == nil {
		t.Fatal("attach of an unknown export accepted")
	}
}

// NBD_CMD_RECONFIGURE carries the index, the request and dead-connection
// timeouts, the new sockets and the backend identifier (the kernel insists
// on the one the device was connected with), laid out as for CONNECT.
func TestEncodeReconfigure(t *testing.T) {
	const nested = 0x8000
	got, err := encodeReconfigure(4, []int{9}, 120*time.Second, 60*time.Second, "vol")
	mustf(t, err, "encode")
	want := concat(nlattr(attrIndex, u32(4)), nlattr(attrTimeout, u64(120)), nlattr(attrDeadConnTimeout, u64(60)),
		nlattr(attrSockets|nested, nlattr(attrSockItem|nested, nlattr(attrSockFD, u32(9)))),
		nlattr(attrBackendID, []byte("vol\x00")))
	if string(got) != string(want) {
		t.Fatalf("reconfigure attributes\n got %x\nwant %x", got, want)
	}
	if genlCmdReconfigure != 3 {
		t.Fatal("NBD_CMD_RECONFIGURE is 3 in nbd-netlink.h")
	}
}

// A resize is an NBD_CMD_RECONFIGURE with the index, the new size and the
// backend identifier, and no sockets.
func TestEncodeResize(t *testing.T) {
	got, err := encodeResize(2, 96<<20, "vol")
	mustf(t, err, "encode")
	want := concat(nlattr(attrIndex, u32(2)), nlattr(attrSizeBytes, u64(96<<20)), nlattr(attrBackendID, []byte("vol\x00")))
	if string(got) != string(want) {
		t.Fatalf("resize attributes\n got %x\nwant %x", got, want)
	}
}

// The request timeout is sent unless asked not to: without one, Linux
// gives a device of several connections the block layer's 30 s, after which
// it shuts a socket down and sends its requests again.
func TestAttachDefaults(t *testing.T) {
	o := AttachOptions{}
	o.ensureDefaults("vol")
	if o.Connections != 4 || o.BackendID != "vol" || o.DeadConnTimeout != 2*time.Minute || o.Timeout != DefaultKernelTimeout {
		t.Fatalf("defaults %+v", o)
	}
	if DefaultKernelTimeout < o.DeadConnTimeout {
		t.Fatalf("the kernel waits %v for a dead server but only %v for a slow request", o.DeadConnTimeout, DefaultKernelTimeout)
	}
	o = AttachOptions{DeadConnTimeout: -1, Timeout: -1, BackendID: "b"}
	o.ensureDefaults("vol")
	if o.DeadConnTimeout != 0 || o.Timeout != 0 || o.BackendID != "b" {
		t.Fatalf("negative timeouts and a given backend: %+v", o)
	}
}

// What AttachKernel asks of the kernel by default: NBD_ATTR_TIMEOUT of
// DefaultKernelTimeout in whole seconds, in CONNECT and in RECONFIGURE.
func TestAttachSendsTimeout(t *testing.T) {
	o := AttachOptions{}
	o.ensureDefaults("vol")
	c, err := encodeConnect(connectRequest{index: 0, size: 512, blockSize: 512, fds: []int{4}, timeout: o.Timeout})
	mustf(t, err, "encode connect")
	r, err := encodeReconfigure(0, []int{4}, o.Timeout, o.DeadConnTimeout, o.BackendID)
	mustf(t, err, "encode reconfigure")
	attr := string(nlattr(attrTimeout, u64(uint64(DefaultKernelTimeout/time.Second))))
	for name, b := range map[string][]byte{"connect": c, "reconfigure": r} {
		if !strings.Contains(string(b), attr) {
			t.Errorf("%s carries no NBD_ATTR_TIMEOUT of %v: %x", name, DefaultKernelTimeout, b)
		}
	}
}

// TestAttachRefusesNegativeConnections: AttachKernel refuses a negative
// Connections (blockdev.ErrInvalid, naming the option) before it looks up
// the export or asks the kernel anything; the old one went on and would
// have connected the device over no socket at all.
func TestAttachRefusesNegativeConnections(t *testing.T) {
	for _, n := range []int{-1, -4} {
		err := AttachOptions{Connections: n}.check()
		want := fmt.Sprintf("Connections %d: negative: give 0 (the default, 4) or more", n)
		if !errors.Is(err, blockdev.ErrInvalid) || !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("Connections %d: %v, want blockdev.ErrInvalid saying %q", n, err, want)
		}
	}
	for _, n := range []int{0, 1, 16} {
		if err := (AttachOptions{Connections: n}).check(); err != nil {
			t.Errorf("Connections %d: %v", n, err)
		}
	}
	if runtime.GOOS != "linux" {
		return
	}
	s, _ := serve(t, Options{Exports: map[string]Export{"mem": {Device: newMem(t, 1<<20, 512)}}}, "tcp")
	// An export that does not exist: the old code failed on that, never
	// reaching the kernel either.
	if _, err := s.AttachKernel(t.Context(), "nope", "", AttachOptions{Connections: -1}); !errors.Is(err, blockdev.ErrInvalid) {
		t.Errorf("AttachKernel with Connections -1: %v, want blockdev.ErrInvalid", err)
	}
}
