package nbd

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/nvstripe/nvstripe/nbd/proto"
)

// ErrTLSRequired ends a connection that asked for an export in plain text
// from a server that requires TLS.
var ErrTLSRequired = errors.New("nbd: TLS required")

// startTLSConfig returns the configuration STARTTLS serves with: cfg, or,
// when cfg asks for client certificates and leaves MaxVersion unset, a copy
// capped at TLS 1.2. In TLS 1.3 Go's certificate request offers RSA keys
// only the RSA-PSS signature schemes (the protocol's rule for handshake
// signatures), and GnuTLS 3.7 (libnbd's nbdinfo, nbdcopy; qemu) picks a
// client certificate by the key kinds the listed schemes name, where
// RSA-PSS does not count as RSA: it sends no certificate and the handshake
// fails. In TLS 1.2 the request lists PKCS#1 schemes and any client sends
// its RSA certificate; ECDSA certificates work in both. The cost: under
// TLS 1.2 the client's certificate crosses the network unencrypted (its
// identity is visible, not its key). A caller that sets MaxVersion gets
// exactly what it asked for.
func startTLSConfig(cfg *tls.Config) *tls.Config {
	if cfg == nil || cfg.ClientAuth == tls.NoClientCert || cfg.MaxVersion != 0 {
		return cfg
	}
	c := cfg.Clone()
	c.MaxVersion = tls.VersionTLS12
	return c
}

// optStartTLS answers NBD_OPT_STARTTLS: an ACK, then the TLS handshake on
// the same stream; everything after goes through TLS, and what was
// negotiated before is forgotten (the protocol says so).
func (c *conn) optStartTLS(st *session, data []byte) error {
	switch {
	case c.s.opts.TLS == nil:
		c.out = proto.AppendOptionError(c.out, proto.OptStartTLS, proto.RepErrUnsup, "this server does not offer TLS")
		return nil
	case st.tls:
		c.out = proto.AppendOptionError(c.out, proto.OptStartTLS, proto.RepErrInvalid, "TLS is already on")
		return nil
	case len(data) != 0:
		c.out = proto.AppendOptionError(c.out, proto.OptStartTLS, proto.RepErrInvalid, "NBD_OPT_STARTTLS takes no data")
		return nil
	case c.br.Buffered() != 0:
		return fmt.Errorf("client sent %d bytes after NBD_OPT_STARTTLS before its ACK", c.br.Buffered())
	}
	c.out = proto.AppendAck(c.out, proto.OptStartTLS)
	if err := c.flushOut(); err != nil {
		return err
	}
	c.out = c.out[:0]
	tc := tls.Server(c.nc, c.s.opts.TLS)
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	c.tls, c.raw = tc, nil
	c.br = bufio.NewReaderSize(tc, readBufSize)
	*st = session{noZeroes: st.noZeroes, tls: true}
	return nil
}
