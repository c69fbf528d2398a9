package nbd

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nvstripe/nvstripe/nbd/proto"
)

// Handshake limits: an option longer than maxOptionLen or more than
// maxOptions options end the connection (the protocol lets a server defend
// itself against a client that haggles forever).
const (
	maxOptionLen = 64 << 10
	maxOptions   = 1024
	// metaContextID is the ID of base:allocation on this server.
	metaContextID = 1
)

// errAbort ends a negotiation the client aborted (a clean end).
var errAbort = errors.New("client sent NBD_OPT_ABORT")

// session is what the handshake negotiated.
type session struct {
	noZeroes   bool
	structured bool
	metaExport string // export base:allocation was selected for, if any
	tls        bool   // STARTTLS done
	metaSet    bool
	exp        *export // set when transmission starts
}

// metaID returns the context ID block status uses on exp, or 0 for none.
func (st *session) metaID() uint32 {
	if st.metaSet && st.exp != nil && st.metaExport == st.exp.name {
		return metaContextID
	}
	return 0
}

// negotiate runs the fixed newstyle handshake up to transmission.
func (c *conn) negotiate() (*session, error) {
	offered := proto.FlagFixedNewstyle | proto.FlagNoZeroes
	c.out = proto.AppendGreeting(c.out[:0], offered)
	if err := c.flushOut(); err != nil {
		return nil, err
	}
	var fb [proto.ClientFlagsSize]byte
	if _, err := io.ReadFull(c.br, fb[:]); err != nil {
		return nil, fmt.Errorf("read client flags: %w", err)
	}
	f, err := proto.ParseClientFlags(fb[:], offered)
	if err != nil {
		return nil, err
	}
	st := &session{noZeroes: f&proto.FlagCNoZeroes != 0}
	for range maxOptions {
		h, data, err := proto.ReadOption(c.br, maxOptionLen)
		if err != nil {
			return nil, err
		}
		c.out = c.out[:0]
		done, err := c.option(st, h.Code, data)
		if ferr := c.flushOut(); err == nil {
			err = ferr
		}
		if err != nil || done {
			return st, err
		}
	}
	return nil, fmt.Errorf("more than %d options: %w", maxOptions, proto.ErrTooLong)
}

// option answers one option into c.out; done means transmission starts.
func (c *conn) option(st *session, code proto.Option, data []byte) (done bool, err error) {
	if c.s.opts.RequireTLS && !st.tls {
		switch code {
		case proto.OptStartTLS, proto.OptAbort:
		case proto.OptExportName:
			return false, fmt.Errorf("NBD_OPT_EXPORT_NAME before TLS, which is required: %w", ErrTLSRequired)
		default:
			c.out = proto.AppendOptionError(c.out, code, proto.RepErrTLSReqd, "TLS is required: send NBD_OPT_STARTTLS first")
			return false, nil
		}
	}
	switch code {
	case proto.OptStartTLS:
		return false, c.optStartTLS(st, data)
	case proto.OptExportName:
		return c.optExportName(st, string(data))
	case proto.OptAbort:
		c.out = proto.AppendAck(c.out, code)
		return false, errAbort
	case proto.OptList:
		c.optList(data)
	case proto.OptInfo, proto.OptGo:
		return c.optInfo(st, code, data), nil
	case proto.OptStructuredReply:
		c.optStructured(st, data)
	case proto.OptListMetaContext, proto.OptSetMetaContext:
		c.optMeta(st, code, data)
	default:
		c.out = proto.AppendOptionError(c.out, code, proto.RepErrUnsup, fmt.Sprintf("%v is not supported", code))
	}
	return false, nil
}

func (c *conn) optExportName(st *session, name string) (bool, error) {
	e := c.s.lookup(name)
	if e == nil {
		// No error reply is possible here: the protocol says to close.
		return false, fmt.Errorf("NBD_OPT_EXPORT_NAME for unknown export %.64q", name)
	}
	st.exp = e
	c.out = proto.AppendExportNameReply(c.out, uint64(e.Device.Size()), e.flags(st.structured), st.noZeroes)
	return true, nil
}

func (c *conn) optList(data []byte) {
	if len(data) != 0 {
		c.out = proto.AppendOptionError(c.out, proto.OptList, proto.RepErrInvalid, "NBD_OPT_LIST takes no data")
		return
	}
	for _, e := range c.s.exportList() {
		c.out = proto.AppendServer(c.out, e.name, e.Description)
	}
	c.out = proto.AppendAck(c.out, proto.OptList)
}

// optInfo answers NBD_OPT_INFO and NBD_OPT_GO; true when GO succeeded.
func (c *conn) optInfo(st *session, code proto.Option, data []byte) bool {
	req, err := proto.ParseInfoRequest(data)
	if err != nil {
		c.out = proto.AppendOptionError(c.out, code, proto.RepErrInvalid, err.Error())
		return false
	}
	e := c.s.lookup(req.Name)
	if e == nil {
		c.out = proto.AppendOptionError(c.out, code, proto.RepErrUnknown, fmt.Sprintf("no export %q", req.Name))
		return false
	}
	for _, t := range req.Infos {
		switch t {
		case proto.InfoName:
			c.out = proto.AppendInfoName(c.out, code, e.name)
		case proto.InfoDescription:
			c.out = proto.AppendInfoDescription(c.out, code, e.Description)
		}
	}
	// BLOCK_SIZE goes out whether asked or not (the protocol allows it),
	// EXPORT last before the ACK.
	c.out = proto.AppendInfoBlockSize(c.out, code, e.blockSize(c.s.opts.MaxRequest))
	c.out = proto.AppendInfoExport(c.out, code, uint64(e.Device.Size()), e.flags(st.structured))
	c.out = proto.AppendAck(c.out, code)
	if code == proto.OptGo {
		st.exp = e
		return true
	}
	return false
}

func (c *conn) optStructured(st *session, data []byte) {
	code := proto.OptStructuredReply
	switch {
	case len(data) != 0:
		c.out = proto.AppendOptionError(c.out, code, proto.RepErrInvalid, "NBD_OPT_STRUCTURED_REPLY takes no data")
	case c.s.opts.NoStructuredReplies:
		c.out = proto.AppendOptionError(c.out, code, proto.RepErrUnsup, "structured replies are disabled")
	case st.structured:
		c.out = proto.AppendOptionError(c.out, code, proto.RepErrInvalid, "structured replies already negotiated")
	default:
		st.structured = true
		c.out = proto.AppendAck(c.out, code)
	}
}

// optMeta answers NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT.
// The only context is base:allocation; SET replaces the selection even when
// it fails.
func (c *conn) optMeta(st *session, code proto.Option, data []byte) {
	set := code == proto.OptSetMetaContext
	if set {
		st.metaSet, st.metaExport = false, ""
	}
	if !st.structured {
		c.out = proto.AppendOptionError(c.out, code, proto.RepErrInvalid, "negotiate NBD_OPT_STRUCTURED_REPLY first")
		return
	}
	req, err := proto.ParseMetaContextRequest(data)
	if err != nil {
		c.out = proto.AppendOptionError(c.out, code, proto.RepErrInvalid, err.Error())
		return
	}
	e := c.s.lookup(req.Name)
	if e == nil {
		c.out = proto.AppendOptionError(c.out, code, proto.RepErrUnknown, fmt.Sprintf("no export %q", req.Name))
		return
	}
	match := !set && len(req.Queries) == 0
	for _, q := range req.Queries {
		if !strings.Contains(q, ":") {
			c.out = proto.AppendOptionError(c.out, code, proto.RepErrInvalid, fmt.Sprintf("query %.64q has no namespace", q))
			return
		}
		match = match || q == proto.MetaContextBaseAllocation || (!set && q == "base:")
	}
	if match && set {
		st.metaSet, st.metaExport = true, e.name
		c.out = proto.AppendMetaContext(c.out, code, metaContextID, proto.MetaContextBaseAllocation)
	} else if match {
		c.out = proto.AppendMetaContext(c.out, code, 0, proto.MetaContextBaseAllocation)
	}
	c.out = proto.AppendAck(c.out, code)
}
