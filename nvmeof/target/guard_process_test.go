package target

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/auth"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// buildNvstripe builds the nvstripe binary into a temporary directory.
func buildNvstripe(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the nvstripe binary")
	}
	return testutil.BuildNvstripe(t, "")
}

// startTargetProcess runs `nvstripe target serve` with args after the
// common ones and returns its listener's address once it is ready.
func startTargetProcess(t *testing.T, bin string, args ...string) string {
	t.Helper()
	return startTargetProcessIn(t, bin, t.TempDir(), nil, append([]string{"--ns", "d0:1MiB"}, args...)...)
}

// startTargetProcessIn is startTargetProcess with its files in dir; it
// sets *pid, when pid is not nil, to the process's ID.
func startTargetProcessIn(t testing.TB, bin, dir string, pid *int, args ...string) string {
	t.Helper()
	args = append([]string{"target", "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--nqn", testNQN}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = io.Discard
	p, addr := testutil.StartReady(t, cmd, "listener 0: ")
	if pid != nil {
		*pid = p.Cmd.Process.Pid
	}
	if addr == "" {
		t.Fatal("target serve printed no listener address before ready")
	}
	return addr
}

// hostReadsAndWrites connects the keyed (s set) or allowed host from
// 127.0.0.1, writes a block and reads it back.
func hostReadsAndWrites(t *testing.T, addr string, s *auth.Secret) {
	t.Helper()
	a := dial(t, addr, pdu.Digests{})
	c := a.connect(0, 31, pdu.CNTLIDDynamic, testNQN, testHost, 0, 0)
	mustOK(t, "host's admin connect", c)
	if s != nil && !a.authenticate(*s) {
		t.Fatal("host's admin queue: right secret refused")
	}
	a.enable(true)
	io := dial(t, addr, pdu.Digests{})
	mustOK(t, "host's io connect", io.connect(1, 127, uint16(c.DW0), testNQN, testHost, 0, 0))
	if s != nil && !io.authenticate(*s) {
		t.Fatal("host's io queue: right secret refused")
	}
	want := bytes.Repeat([]byte("guarded target! "), nsBS/16)
	mustOK(t, "host's write", io.do(rwSQE(pdu.IOWrite, 1, 3, 1, true), want, nil))
	got := make([]byte, nsBS)
	mustOK(t, "host's read", io.do(rwSQE(pdu.IORead, 1, 3, 1, false), nil, got))
	if !bytes.Equal(got, want) {
		t.Fatal("host read back other data than it wrote")
	}
}

// TestGuardProcesses runs the attacks on real `nvstripe target serve`
// processes (one binary built for both).
func TestGuardProcesses(t *testing.T) {
	bin := buildNvstripe(t)
	t.Run("keyed stranger", func(t *testing.T) { keyedStrangerProcess(t, bin) })
	t.Run("handshake flood", func(t *testing.T) { handshakeFloodProcess(t, bin) })
}

// keyedStrangerProcess: against a real `target serve --host-keys`, a
// keyless stranger from 127.0.0.2 claims the keyed host's NQN and opens
// 300 queues with keep-alive 0 (as many as the target takes) and holds
// them; the real host from 127.0.0.1 still connects, authenticates,
// writes and reads. Before, the stranger's 256 queues filled the host's
// cap for ever and the host's Connect got Controller Busy.
func keyedStrangerProcess(t *testing.T, bin string) {
	s, err := auth.GenerateSecret(rand.Reader, auth.HashSHA256, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(t.TempDir(), "host-keys")
	if err := os.WriteFile(keys, []byte(testHost+" "+s.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startTargetProcess(t, bin, "--host-keys", keys)
	held := 0
	for i := 0; i < 300; i++ {
		h, err := dialQuiet(addr, "127.0.0.2")
		if err != nil {
			continue // refused: the target closed it
		}
		t.Cleanup(func() { h.nc.Close() })
		if c, err := h.tryConnect(); err == nil && c.Status.Success() {
			held++
		}
	}
	t.Logf("the stranger holds %d unauthenticated queues", held)
	start := time.Now()
	hostReadsAndWrites(t, addr, &s)
	t.Logf("the host connected, authenticated, wrote and read in %v beside them", time.Since(start).Round(time.Millisecond))
}

// handshakeFloodProcess: against a real `target serve` (1,024
// connections per listener), 1,100 connections from five addresses
// (127.0.0.2-6) that never send a byte; a host from 127.0.0.1 connects,
// writes and reads at once, long before the 10 s handshake deadline.
// Before, the flood held every connection slot and the host's connection
// was closed unanswered until the deadline.
func handshakeFloodProcess(t *testing.T, bin string) {
	addr := startTargetProcess(t, bin, "--allow-host", testHost)
	for i := 0; i < 1100; i++ {
		src := fmt.Sprintf("127.0.0.%d", 2+i%5)
		testutil.DialFrom(t, src, addr)
	}
	// The target accepts in arrival order: the host's connection comes
	// after the whole flood.
	start := time.Now()
	hostReadsAndWrites(t, addr, nil)
	t.Logf("the host connected, wrote and read in %v beside the flood", time.Since(start).Round(time.Millisecond))
}

// dialQuiet is dialFrom that returns an error instead of failing: the
// target may close the connection at once.
func dialQuiet(addr, src string) (*host, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	h := &host{nc: nc, br: bufio.NewReaderSize(nc, 4096)}
	if _, err := nc.Write(pdu.ICReq{}.Append(nil)); err != nil {
		nc.Close()
		return nil, err
	}
	p, err := h.tryRead()
	if err != nil || p.Header.Type != pdu.TypeICResp {
		nc.Close()
		return nil, fmt.Errorf("icresp: %v", err)
	}
	return h, nil
}

// tryConnect sends the stranger's admin Connect claiming testHost, with
// keep-alive 0, and reads its completion; an error when the target
// closed the connection.
func (h *host) tryConnect() (pdu.CQE, error) {
	cd := pdu.ConnectData{CNTLID: pdu.CNTLIDDynamic, SubNQN: testNQN, HostNQN: testHost}
	data := cd.Marshal()
	sqe := pdu.ConnectCmd{QID: 0, SQSize: 31}.SQE(0)
	sqe.CID, sqe.Flags = 1, pdu.PSDTSGL
	sqe.SGL = pdu.SGL{ID: pdu.SGLInCapsule, Length: uint32(len(data))}
	if _, err := h.nc.Write(pdu.AppendCapsuleCmd(nil, &sqe, data, pdu.Digests{})); err != nil {
		return pdu.CQE{}, err
	}
	p, err := h.tryRead()
	if err != nil {
		return pdu.CQE{}, err
	}
	if p.Header.Type != pdu.TypeCapsuleResp {
		return pdu.CQE{}, fmt.Errorf("got %v", p.Header.Type)
	}
	return pdu.ParseCapsuleResp(p.Hdr), nil
}
