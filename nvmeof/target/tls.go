package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

// TLSMode says whether a target's connections run NVMe/TCP TLS 1.3 with a
// PSK (Config.TLS).
type TLSMode int

const (
	// TLSOff serves plaintext only.
	TLSOff TLSMode = iota
	// TLSOn runs TLS on a connection whose first bytes are a TLS
	// ClientHello and serves the others in plaintext.
	TLSOn
	// TLSRequire runs TLS on every connection and closes one that opens
	// in plaintext.
	TLSRequire
)

// ParseTLSMode reads "off", "on" or "require" (`target serve --tls`).
func ParseTLSMode(s string) (TLSMode, error) {
	for m, name := range tlsModeNames {
		if s == name {
			return TLSMode(m), nil
		}
	}
	return TLSOff, fmt.Errorf("unknown TLS mode %q: want off, on or require", s)
}

var tlsModeNames = []string{"off", "on", "require"}

func (m TLSMode) String() string {
	if int(m) < len(tlsModeNames) && m >= 0 {
		return tlsModeNames[m]
	}
	return fmt.Sprintf("TLSMode(%d)", int(m))
}

// discEntry marks a discovery log entry with the port's TLS: TSAS
// security type TLS 1.3 and, for TLSRequire, secure channel required.
func (m TLSMode) discEntry(e pdu.DiscoveryEntry) pdu.DiscoveryEntry {
	if m == TLSOff {
		return e
	}
	e.SecType = pdu.SecTypeTLS13
	if m == TLSRequire {
		e.TReq = e.TReq&^3 | pdu.TReqRequired
	}
	return e
}

// ReadTLSKeys reads a TLS keys file (`target serve --tls-keys`): one host
// per line, "HOSTNQN NVMeTLSkey-1:..." (gen-tls-key); blank lines and
// #-comments are ignored. Malformed lines are ErrSpec. The file holds
// secrets: it should be readable by root only.
func ReadTLSKeys(path string) (map[string]tlspsk.Key, error) {
	keys := map[string]tlspsk.Key{}
	err := readKeyLines(path, "tls keys", func(fs []string) error {
		if len(fs) != 2 {
			return errors.New("want HOSTNQN NVMeTLSkey-1:...")
		}
		k, err := tlspsk.ParseKey(fs[1])
		if err != nil {
			return err
		}
		if _, dup := keys[fs[0]]; dup {
			return fmt.Errorf("host %s listed twice", fs[0])
		}
		keys[fs[0]] = k
		return nil
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// secure runs the TLS handshake on an accepted connection as Config.TLS
// says and returns the connection to serve NVMe/TCP on; false when it
// refused and closed nc.
func (t *Target) secure(l *listener, nc net.Conn) (net.Conn, bool) {
	if t.cfg.TLS == TLSOff {
		return nc, true
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	nc.SetReadDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	isTLS, rc, err := tlspsk.Sniff(nc)
	reason := RefusedTLS
	switch {
	case errors.Is(err, io.EOF):
		l.pending.Done(nc) // closed before a byte: a probe, not a refusal
		nc.Close()
		return nil, false
	case err != nil:
		reason = RefusedHandshake
		err = fmt.Errorf("no first byte within %v: %w", t.cfg.HandshakeTimeout, err)
	case !isTLS && t.cfg.TLS == TLSRequire:
		reason = RefusedTLSRequired
		err = errors.New("plaintext connection refused: this target requires TLS (target serve --tls=require); " +
			"give the host its key with --tls-key-file")
	case !isTLS:
		return rc, true
	default:
		ctx, cancel := context.WithTimeout(t.ctx, t.cfg.HandshakeTimeout)
		var tc *tlspsk.Conn
		tc, err = tlspsk.Server(ctx, rc, tlspsk.ServerConfig{Lookup: t.tlsPSK})
		cancel()
		if err == nil {
			return tc, true
		}
	}
	t.refuse(reason)
	host, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
	if t.refused.first(host + "\x00" + reason) {
		t.logf("nvmeof/target: listener %d: %s: %v (logged once per address)", l.idx, nc.RemoteAddr(), err)
	}
	l.pending.Done(nc)
	nc.Close()
	return nil, false
}

// tlsPSK is the TLS PSK of an identity "NVMe0R0h HOSTNQN SUBNQN": the key
// of the host in Config.TLSKeys, for a subsystem this target serves (or
// discovery), when the identity's hash matches the key's.
func (t *Target) tlsPSK(identity string) ([]byte, *tlspsk.Suite, error) {
	h, host, sub, err := tlspsk.ParseIdentity(identity)
	if err != nil {
		return nil, nil, err
	}
	k, ok := t.cfg.TLSKeys[host]
	if !ok {
		return nil, nil, fmt.Errorf("host %s has no TLS key (target serve --tls-keys)", host)
	}
	if t.subs[sub] == nil && sub != pdu.DiscoveryNQN {
		return nil, nil, fmt.Errorf("no subsystem %s", sub)
	}
	_, psk, s, err := k.PSK(host, sub)
	if err != nil {
		return nil, nil, err
	}
	if want := tlspsk.Identity(s, host, sub); want != identity {
		return nil, nil, fmt.Errorf("host %s's key is for %s, the identity asks for hash %02d", host, s, h)
	}
	return psk, s, nil
}

// tlsAllows checks a Connect on a TLS connection names the host and
// subsystem of the TLS identity: a host's key opens only its own
// queues. It answers a mismatch itself (Connect Invalid Host).
func (c *conn) tlsAllows(cmd *command, d pdu.ConnectData) bool {
	tc, ok := c.nc.(*tlspsk.Conn)
	if !ok {
		return true
	}
	_, host, sub, err := tlspsk.ParseIdentity(tc.Identity())
	if err == nil && host == d.HostNQN && sub == d.SubNQN {
		return true
	}
	c.t.refuse(RefusedTLS)
	c.t.logf("nvmeof/target: %s: Connect as host %s to %s refused: the TLS identity is %q",
		c.nc.RemoteAddr(), d.HostNQN, d.SubNQN, tc.Identity())
	cmd.complete(pdu.MakeStatus(pdu.SCConnectInvalidHost, true), pdu.ConnectOffHostNQN|1<<16, 0)
	return false
}
