package initiator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/nvstripe/nvstripe/blockdev"
)

// peerRecorder relays every connection to target and records the IP each
// came from.
type peerRecorder struct {
	ln    net.Listener
	mu    sync.Mutex
	peers map[string]int
}

func newPeerRecorder(t *testing.T, target string) *peerRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &peerRecorder{ln: ln, peers: map[string]int{}}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.peers[c.RemoteAddr().(*net.TCPAddr).IP.String()]++
			r.mu.Unlock()
			wg.Go(func() { relay(c, target) })
		}
	})
	return r
}

func relay(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { io.Copy(s, c); s.Close() }()
	io.Copy(c, s)
}

func (r *peerRecorder) seen() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.peers)
}

// TestHostTraddr opens a device with HostTraddr 127.0.0.2 through a relay
// that records the source address of every connection: every one (admin
// and I/O queues) comes from 127.0.0.2, and IO works. Without HostTraddr
// they come from 127.0.0.1, so the check can tell the two apart.
func TestHostTraddr(t *testing.T) {
	if err := CheckHostTraddr("127.0.0.2"); err != nil {
		t.Skipf("this host cannot bind 127.0.0.2 (Linux has all of 127/8 on lo): %v", err)
	}
	f := newFixture(t, 1, 1<<20, nil)
	for _, src := range []string{"127.0.0.2", ""} {
		rec := newPeerRecorder(t, f.addrs[0])
		o := f.options(t)
		o.Paths, o.HostTraddr, o.IOQueues = []string{rec.ln.Addr().String()}, src, 2
		d := open(t, o)
		want := bytes.Repeat([]byte{0x5a}, 4096)
		if err := d.WriteAt(context.Background(), want, 8192); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		if err := d.ReadAt(context.Background(), got, 8192); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("HostTraddr %q: read back %v (equal %v)", src, err, bytes.Equal(got, want))
		}
		wantIP := src
		if src == "" {
			wantIP = "127.0.0.1"
		}
		peers := rec.seen()
		if len(peers) != 1 || peers[wantIP] < 3 { // admin + 2 I/O queues
			t.Errorf("HostTraddr %q: connections came from %v, want all (at least 3) from %s", src, peers, wantIP)
		}
	}
}

// TestCheckHostTraddr: an address that is not an IP, or not one of this
// host's, is refused with a message naming it; none and loopback pass.
func TestCheckHostTraddr(t *testing.T) {
	for _, ok := range []string{"", "127.0.0.1"} {
		if err := CheckHostTraddr(ok); err != nil {
			t.Errorf("CheckHostTraddr(%q) = %v", ok, err)
		}
	}
	// 192.0.2.0/24 is TEST-NET-1: documentation only, on no interface.
	for bad, why := range map[string]string{"eth0": "not an IP address", "192.0.2.7": "not an address of this host"} {
		err := CheckHostTraddr(bad)
		if !errors.Is(err, blockdev.ErrInvalid) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckHostTraddr(%q) = %v, want ErrInvalid naming it, %q", bad, err, why)
		}
	}
}
