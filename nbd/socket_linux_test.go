package nbd

import (
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nvstripe/nvstripe/internal/testutil"
)

// TestLoopbackSendBuffer: a connection from a loopback client gets the
// configured send buffer (Linux doubles it, within net.core.wmem_max); a
// negative setting leaves the kernel's.
func TestLoopbackSendBuffer(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/net/core/wmem_max")
	if err != nil {
		t.Skipf("cannot read net.core.wmem_max: %v", err)
	}
	wmemMax, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set, want int
	}{
		{256 << 10, 2 * min(256<<10, wmemMax)},
		{-1, 0}, // unchanged: compared with an untuned socket below
	} {
		_, sc := testutil.TCPPair(t)
		before := sndbuf(t, sc)
		tuneSocket(sc, Options{LoopbackSendBuffer: c.set})
		got := sndbuf(t, sc)
		if c.want == 0 {
			c.want = before
		}
		if got != c.want {
			t.Errorf("LoopbackSendBuffer %d: SO_SNDBUF %d, want %d", c.set, got, c.want)
		}
	}
}

func sndbuf(t *testing.T, nc net.Conn) int {
	t.Helper()
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := rc.Control(func(fd uintptr) { v, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return v
}
