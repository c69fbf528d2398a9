package initiator

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/nvstripe/nvstripe/blockdev"
	"github.com/nvstripe/nvstripe/nvmeof/tlspsk"
)

// ErrTLS marks a TLS handshake the target refused (also class
// blockdev.ErrInvalid: retrying with the same key does not help).
var ErrTLS = errors.New("NVMe/TCP TLS refused")

// tlsKey parses Options.TLSKey; nil when none is set.
func (o *Options) tlsKey() (*tlspsk.Key, error) {
	if o.TLSKey == "" {
		return nil, nil
	}
	k, err := tlspsk.ParseKey(o.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("TLSKey: %w", err)
	}
	return &k, nil
}

// startTLS runs the TLS 1.3 handshake on a new connection when the
// options carry a TLS key (the ClientHello is the first thing on the
// wire; ICReq follows inside TLS), with the identity of this host and the
// subsystem. Without a key it returns conn as it is.
func startTLS(ctx context.Context, o *Options, conn net.Conn, addr string) (net.Conn, error) {
	k, _ := o.tlsKey() // validated with the options
	if k == nil {
		return conn, nil
	}
	id, psk, suite, err := k.PSK(o.HostNQN, o.SubsysNQN)
	if err != nil {
		return nil, blockdev.Mark(fmt.Errorf("nvme/tcp %s: tls: %w", addr, err), blockdev.ErrInvalid)
	}
	tc, err := tlspsk.Client(ctx, conn, tlspsk.ClientConfig{Identity: id, PSK: psk, Suite: suite})
	if err == nil {
		return tc, nil
	}
	var ae *tlspsk.AlertError
	if errors.As(err, &ae) && ae.Remote {
		return nil, blockdev.Mark(fmt.Errorf("nvme/tcp %s: %w for identity %q: %w; the key of --tls-key-file must be "+
			"the one the target's --tls-keys file gives host %s", addr, ErrTLS, id, err, o.HostNQN), blockdev.ErrInvalid)
	}
	if errors.Is(err, tlspsk.ErrTLS) || notNVMe(err) {
		return nil, blockdev.Mark(&NotNVMeError{Addr: addr, Err: fmt.Errorf("no TLS handshake (is TLS on at the target? "+
			"`target serve --tls=on`): %w", err)}, blockdev.ErrUnavailable)
	}
	return nil, blockdev.Mark(fmt.Errorf("nvme/tcp %s: %w", addr, err), blockdev.ErrUnavailable)
}
