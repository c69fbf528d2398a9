package tlspsk

import "encoding/binary"

// Handshake message types (RFC 8446 section 4).
const (
	typeClientHello         = 1
	typeServerHello         = 2
	typeNewSessionTicket    = 4
	typeEncryptedExtensions = 8
	typeFinished            = 20
	typeKeyUpdate           = 24
)

// Extensions used here.
const (
	extSupportedGroups = 10
	extSigAlgs         = 13
	extEarlyData       = 42
	extPreSharedKey    = 41
	extSupportedVers   = 43
	extPSKModes        = 45
	extKeyShare        = 51

	groupX25519  = 0x001d
	versionTLS13 = 0x0304
	pskDHEKE     = 1
)

// helloRetryRandom is the ServerHello.random of a HelloRetryRequest.
var helloRetryRandom = [32]byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

// cursor reads big-endian fields; a read past the end sets bad and
// returns zeros, so a parser checks bad (or empty) once at the end.
type cursor struct {
	b   []byte
	bad bool
}

func (c *cursor) take(n int) []byte {
	if n < 0 || n > len(c.b) {
		c.bad, c.b = true, nil
		return nil
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v
}

func (c *cursor) u8() int {
	v := c.take(1)
	if v == nil {
		return 0
	}
	return int(v[0])
}

func (c *cursor) u16() int {
	v := c.take(2)
	if v == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(v))
}

func (c *cursor) u32() uint32 {
	v := c.take(4)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

// vec8 and vec16 read a vector with a 1- or 2-byte length.
func (c *cursor) vec8() cursor  { return cursor{b: c.take(c.u8())} }
func (c *cursor) vec16() cursor { return cursor{b: c.take(c.u16())} }

// done says the cursor was read exactly to its end.
func (c *cursor) done() bool { return !c.bad && len(c.b) == 0 }

// builder appends big-endian fields with length prefixes filled in later.
type builder struct{ b []byte }

func (w *builder) u8(v int)       { w.b = append(w.b, byte(v)) }
func (w *builder) u16(v int)      { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *builder) bytes(p []byte) { w.b = append(w.b, p...) }

// open16/open8/open24 start a length-prefixed vector; close fills it in.
func (w *builder) open(n int) int {
	w.b = append(w.b, make([]byte, n)...)
	return len(w.b)
}

func (w *builder) close(start, n int) {
	l := len(w.b) - start
	for i := range n {
		w.b[start-1-i] = byte(l >> (8 * i))
	}
}

// extension appends an extension of type typ whose body fill writes.
func (w *builder) extension(typ int, fill func()) {
	w.u16(typ)
	s := w.open(2)
	fill()
	w.close(s, 2)
}

// handshake wraps body as a handshake message of type typ.
func handshakeMsg(typ int, body []byte) []byte {
	m := make([]byte, 4, 4+len(body))
	m[0] = byte(typ)
	m[1], m[2], m[3] = byte(len(body)>>16), byte(len(body)>>8), byte(len(body))
	return append(m, body...)
}

// clientHello is what a server needs of a ClientHello.
type clientHello struct {
	sessionID  []byte
	suites     []uint16
	x25519     []byte // the X25519 key share, nil if none
	tls13      bool
	dheMode    bool
	identities []string
	binders    [][]byte
	bindersAt  int // offset in the message of the binders list (truncation point)
	earlyData  bool
}

// parseClientHello parses a ClientHello message (with its 4-byte header).
func parseClientHello(msg []byte) (*clientHello, *AlertError) {
	c := cursor{b: msg[4:]}
	ch := &clientHello{}
	if c.u16() != 0x0303 {
		return nil, alertf(alertProtocolVersion, "ClientHello legacy version is not TLS 1.2")
	}
	c.take(32)
	sid := c.vec8()
	ch.sessionID = sid.b
	if len(sid.b) > 32 {
		return nil, alertf(alertDecodeError, "ClientHello session id of %d bytes", len(sid.b))
	}
	suites := c.vec16()
	if len(suites.b) == 0 || len(suites.b)%2 != 0 {
		return nil, alertf(alertDecodeError, "ClientHello cipher suites list of %d bytes", len(suites.b))
	}
	for !suites.done() {
		ch.suites = append(ch.suites, uint16(suites.u16()))
	}
	comp := c.vec8()
	if len(comp.b) != 1 || comp.b[0] != 0 {
		return nil, alertf(alertIllegalParameter, "ClientHello compression methods are not [null]")
	}
	extStart := len(msg) - len(c.b)
	exts := c.vec16()
	if c.bad || len(c.b) != 0 {
		return nil, alertf(alertDecodeError, "malformed ClientHello")
	}
	if err := ch.parseExtensions(exts, msg, extStart+2); err != nil {
		return nil, err
	}
	return ch, nil
}

func (ch *clientHello) parseExtensions(exts cursor, msg []byte, base int) *AlertError {
	seen := map[int]bool{}
	for len(exts.b) > 0 {
		at := base + len(msg[base:]) - len(exts.b) // offset of this extension in msg
		typ := exts.u16()
		body := exts.vec16()
		if exts.bad {
			return alertf(alertDecodeError, "malformed ClientHello extension")
		}
		if seen[typ] {
			return alertf(alertIllegalParameter, "ClientHello repeats extension %d", typ)
		}
		seen[typ] = true
		var err *AlertError
		switch typ {
		case extSupportedVers:
			err = ch.parseVersions(body)
		case extKeyShare:
			err = ch.parseKeyShares(body)
		case extPSKModes:
			err = ch.parsePSKModes(body)
		case extEarlyData:
			ch.earlyData = true
		case extPreSharedKey:
			if len(exts.b) != 0 {
				return alertf(alertIllegalParameter, "pre_shared_key is not the last ClientHello extension")
			}
			err = ch.parsePSK(body, at+4)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (ch *clientHello) parseVersions(body cursor) *AlertError {
	v := body.vec8()
	if !body.done() || len(v.b) < 2 || len(v.b)%2 != 0 {
		return alertf(alertDecodeError, "malformed supported_versions")
	}
	for !v.done() {
		ch.tls13 = ch.tls13 || v.u16() == versionTLS13
	}
	return nil
}

func (ch *clientHello) parseKeyShares(body cursor) *AlertError {
	shares := body.vec16()
	if !body.done() {
		return alertf(alertDecodeError, "malformed key_share")
	}
	for len(shares.b) > 0 {
		group := shares.u16()
		key := shares.vec16()
		if shares.bad || len(key.b) == 0 {
			return alertf(alertDecodeError, "malformed key_share entry")
		}
		if group == groupX25519 && ch.x25519 == nil {
			ch.x25519 = key.b
		}
	}
	return nil
}

func (ch *clientHello) parsePSKModes(body cursor) *AlertError {
	m := body.vec8()
	if !body.done() || len(m.b) == 0 {
		return alertf(alertDecodeError, "malformed psk_key_exchange_modes")
	}
	for _, mode := range m.b {
		ch.dheMode = ch.dheMode || mode == pskDHEKE
	}
	return nil
}

// parsePSK reads the identities and binders; at is the offset of the
// extension body in the message.
func (ch *clientHello) parsePSK(body cursor, at int) *AlertError {
	n := len(body.b)
	ids := body.vec16()
	ch.bindersAt = at + (n - len(body.b))
	binders := body.vec16()
	if !body.done() || len(ids.b) == 0 || len(binders.b) == 0 {
		return alertf(alertDecodeError, "malformed pre_shared_key")
	}
	for len(ids.b) > 0 {
		id := ids.vec16()
		ids.u32() // obfuscated_ticket_age: 0 for external PSKs, unused
		if ids.bad || len(id.b) == 0 {
			return alertf(alertDecodeError, "malformed PSK identity")
		}
		ch.identities = append(ch.identities, string(id.b))
	}
	for len(binders.b) > 0 {
		b := binders.vec8()
		if binders.bad || len(b.b) < 32 {
			return alertf(alertDecodeError, "malformed PSK binder")
		}
		ch.binders = append(ch.binders, b.b)
	}
	if len(ch.binders) != len(ch.identities) {
		return alertf(alertIllegalParameter, "%d PSK identities but %d binders", len(ch.identities), len(ch.binders))
	}
	return nil
}

// serverHello is what a client needs of a ServerHello.
type serverHello struct {
	random    []byte
	sessionID []byte
	suite     uint16
	tls13     bool
	x25519    []byte
	pskIndex  int // -1: no pre_shared_key
}

func parseServerHello(msg []byte) (*serverHello, *AlertError) {
	c := cursor{b: msg[4:]}
	sh := &serverHello{pskIndex: -1}
	if c.u16() != 0x0303 {
		return nil, alertf(alertProtocolVersion, "ServerHello legacy version is not TLS 1.2")
	}
	sh.random = c.take(32)
	sh.sessionID = c.vec8().b
	sh.suite = uint16(c.u16())
	if c.u8() != 0 {
		return nil, alertf(alertIllegalParameter, "ServerHello compression is not null")
	}
	exts := c.vec16()
	if c.bad || len(c.b) != 0 {
		return nil, alertf(alertDecodeError, "malformed ServerHello")
	}
	seen := map[int]bool{}
	for len(exts.b) > 0 {
		typ := exts.u16()
		body := exts.vec16()
		if exts.bad || seen[typ] {
			return nil, alertf(alertDecodeError, "malformed or repeated ServerHello extension")
		}
		seen[typ] = true
		switch typ {
		case extSupportedVers:
			sh.tls13 = body.u16() == versionTLS13
		case extKeyShare:
			if body.u16() != groupX25519 {
				return nil, alertf(alertIllegalParameter, "server chose a key share group other than X25519")
			}
			sh.x25519 = body.vec16().b
		case extPreSharedKey:
			sh.pskIndex = body.u16()
		default:
			return nil, alertf(alertUnsupportedExtension, "ServerHello extension %d was not offered", typ)
		}
		if !body.done() {
			return nil, alertf(alertDecodeError, "malformed ServerHello extension %d", typ)
		}
	}
	return sh, nil
}

// checkEncryptedExtensions accepts an EncryptedExtensions message that
// answers only what a client of this package offered.
func checkEncryptedExtensions(msg []byte) *AlertError {
	c := cursor{b: msg[4:]}
	exts := c.vec16()
	if !c.done() {
		return alertf(alertDecodeError, "malformed EncryptedExtensions")
	}
	for len(exts.b) > 0 {
		typ := exts.u16()
		exts.vec16()
		if exts.bad {
			return alertf(alertDecodeError, "malformed EncryptedExtensions")
		}
		if typ != extSupportedGroups {
			return alertf(alertUnsupportedExtension, "EncryptedExtensions has extension %d, not offered", typ)
		}
	}
	return nil
}
