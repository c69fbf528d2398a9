package initiator

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/internal/testutil"
	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// TestConnectRefusedNamesWhatWasTried connects to a real target with a host
// it does not allow and with a subsystem it does not serve: the error names
// the address, both NQNs and what to do, and keeps the NVMe status.
func TestConnectRefusedNamesWhatWasTried(t *testing.T) {
	f := newFixture(t, 1, 1<<20, nil)
	const stranger = "nqn.2024-01.io.nvstripe:host-stranger"
	cases := []struct {
		name   string
		mut    func(*Options)
		status pdu.StatusCode
		want   []string
	}{
		{"host not allowed", func(o *Options) { o.HostNQN = stranger }, pdu.SCConnectInvalidHost,
			[]string{f.addrs[0], testNQN, stranger, "--allow-host " + stranger, "allowed_hosts", "/etc/nvme/hostnqn"}},
		{"unknown subsystem", func(o *Options) { o.SubsysNQN = testNQN + "-typo" }, pdu.SCConnectInvalidParam,
			[]string{f.addrs[0], testNQN + "-typo", testHost, "has no subsystem", "nvstripe ns discover tcp://" + f.addrs[0] + " --host HOST"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := f.options(t)
			tc.mut(&o)
			d, err := Open(context.Background(), o)
			if err == nil {
				d.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			var ce *ConnectError
			var se *StatusError
			if !errors.As(err, &ce) || !errors.As(err, &se) || se.Status != tc.status {
				t.Errorf("want a ConnectError with status %v, got %v", tc.status, err)
			}
			if !errors.Is(err, blockdev.ErrUnavailable) {
				t.Errorf("lost the blockdev class: %v", err)
			}
		})
	}
}

// TestConnectNotNVMePeer points the initiator at peers that are not
// NVMe/TCP targets: one that closes at once, one that answers in HTTP, an
// HTTP server (which waits for a request line that never comes), and one
// that answers with TLS bytes.
func TestConnectNotNVMePeer(t *testing.T) {
	closer := listenServe(t, func(c net.Conn) { c.Close() })
	tlsBytes := listenServe(t, func(c net.Conn) {
		// a TLS alert record (fatal, protocol version), as a TLS server may send
		_, _ = c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46})
		c.Close()
	})
	httpAnswer := listenServe(t, func(c net.Conn) {
		_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
		c.Close()
	})
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.NotFoundHandler()}
	go hs.Serve(hl)
	t.Cleanup(func() { hs.Close() })
	for name, addr := range map[string]string{"eof": closer, "http answer": httpAnswer,
		"http server": hl.Addr().String(), "tls": tlsBytes} {
		t.Run(name, func(t *testing.T) {
			f := &fixture{addrs: []string{addr}}
			o := f.options(t)
			o.ConnectTimeout = 500 * time.Millisecond // only the silent HTTP server waits it out
			d, err := Open(context.Background(), o)
			if err == nil {
				d.Close()
				t.Fatal("Open succeeded")
			}
			want := addr + " did not answer as an NVMe/TCP target (is this the NVMe port? the default is 4420; does the target require TLS?"
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q: %v", want, err)
			}
			var ne *NotNVMeError
			if !errors.As(err, &ne) || !errors.Is(err, errTransport) || !errors.Is(err, blockdev.ErrUnavailable) {
				t.Errorf("want a NotNVMeError of class transport/unavailable: %v", err)
			}
			_, err = Discover(context.Background(), addr, DiscoverOptions{HostNQN: testHost, Timeout: 500 * time.Millisecond})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Discover: want %q, got %v", want, err)
			}
		})
	}
}

// listenServe is testutil.Serve under this package's old name.
var listenServe = testutil.Serve

// TestConnectAdvice decodes every Connect status a user can cause into a
// sentence naming what was tried and what to do.
func TestConnectAdvice(t *testing.T) {
	const addr, sub, host = "10.0.0.7:4420", "nqn.2024-01.io.x:sub", "nqn.2024-01.io.x:host"
	cases := []struct {
		status pdu.StatusCode
		dw0    uint32
		want   string
	}{
		{pdu.SCConnectInvalidHost, 0, "not allowed into that subsystem; allow it on the target (`nvstripe target serve --allow-host " + host},
		{pdu.SCConnectInvalidParam, 1<<16 | pdu.ConnectOffSubNQN, "the target has no subsystem " + sub + "; list the ones it serves with `nvstripe ns discover tcp://" + addr + " --host HOST`"},
		{pdu.SCConnectInvalidParam, 1<<16 | pdu.ConnectOffHostNQN, "does not accept host NQN " + host + "; allow it"},
		{pdu.SCConnectInvalidParam, 1<<16 | pdu.ConnectOffCNTLID, "controller ID"},
		{pdu.SCConnectInvalidParam, sqeOffSQSize, "refused queue 1's size"},
		{pdu.SCConnectInvalidParam, 1<<16 | 800, "offset 800 in the data); most often the subsystem NQN is unknown"},
		{pdu.SCConnectControllerBusy, 0, "no controller or queue to spare for this host"},
		{pdu.SCConnectRestartDisc, 0, "configuration changed; look the subsystem up again"},
		{pdu.SCConnectIncompatFormat, 0, "does not support this Connect format"},
		{pdu.SCAuthRequired, 0, "requires DH-HMAC-CHAP authentication; pass this host's secret with --dhchap-secret-file"},
		{pdu.SCInvalidQueueID, 0, "refused I/O queue 1"},
		{pdu.SCInvalidQueueSize, 0, "refused I/O queue 1"},
		{pdu.SCInternalError, 0, "refused the Connect command"},
	}
	for _, tc := range cases {
		err := connectErr(statusErr("connect qid 1", pdu.MakeStatus(tc.status, true)), addr, sub, host, 1, tc.dw0)
		msg := err.Error()
		prefix := addr + " refused host " + host + " for subsystem " + sub + ": "
		if !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tc.want) {
			t.Errorf("status %v dw0 %#x:\n got %s\nwant %s...%s", tc.status, tc.dw0, msg, prefix, tc.want)
		}
		var se *StatusError
		if !errors.As(err, &se) || se.Status != tc.status {
			t.Errorf("status %v: StatusError lost: %v", tc.status, err)
		}
	}
	plain := errors.New("connection reset")
	if got := connectErr(plain, addr, sub, host, 0, 0); got != plain {
		t.Errorf("a transport error was rewritten: %v", got)
	}
}
