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
