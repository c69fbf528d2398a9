package proto

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// AppendGreeting appends the server greeting of the fixed newstyle handshake
// ("Newstyle negotiation"): NBDMAGIC, IHAVEOPT and the handshake flags.
func AppendGreeting(b []byte, flags HandshakeFlags) []byte {
	b = binary.BigEndian.AppendUint64(b, MagicNBD)
	b = binary.BigEndian.AppendUint64(b, MagicIHaveOpt)
	return binary.BigEndian.AppendUint16(b, uint16(flags))
}

// ParseGreeting parses a server greeting (the client side).
func ParseGreeting(b []byte) (HandshakeFlags, error) {
	if len(b) < GreetingSize {
		return 0, fmt.Errorf("greeting of %d bytes: %w", len(b), ErrShort)
	}
	if m := binary.BigEndian.Uint64(b); m != MagicNBD {
		return 0, fmt.Errorf("greeting magic %#x: %w", m, ErrBadMagic)
	}
	if m := binary.BigEndian.Uint64(b[8:]); m != MagicIHaveOpt {
		return 0, fmt.Errorf("greeting magic %#x (oldstyle?): %w", m, ErrBadMagic)
	}
	return HandshakeFlags(binary.BigEndian.Uint16(b[16:])), nil
}

// AppendClientFlags appends the client's flags.
func AppendClientFlags(b []byte, f ClientFlags) []byte {
	return binary.BigEndian.AppendUint32(b, uint32(f))
}

// ParseClientFlags parses the client's flags and checks them against what
// the server offered: a bit that is unknown or answers nothing offered is
// ErrUnknownFlags, and the server must close the connection ("Client flags").
func ParseClientFlags(b []byte, offered HandshakeFlags) (ClientFlags, error) {
	if len(b) < ClientFlagsSize {
		return 0, fmt.Errorf("client flags of %d bytes: %w", len(b), ErrShort)
	}
	f := ClientFlags(binary.BigEndian.Uint32(b))
	allowed := FlagCFixedNewstyle
	if offered&FlagNoZeroes != 0 {
		allowed |= FlagCNoZeroes
	}
	if f&^allowed != 0 {
		return f, fmt.Errorf("client flags %#x (allowed %#x): %w", uint32(f), uint32(allowed), ErrUnknownFlags)
	}
	return f, nil
}

// OptionHeader is the fixed part of a client option.
type OptionHeader struct {
	Code   Option
	Length uint32 // of the data that follows
}

// AppendOption appends an option with its data (the client side).
func AppendOption(b []byte, code Option, data []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, MagicIHaveOpt)
	b = binary.BigEndian.AppendUint32(b, uint32(code))
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// ParseOptionHeader parses the 16-byte header of a client option.
func ParseOptionHeader(b []byte) (OptionHeader, error) {
	if len(b) < OptionHeaderSize {
		return OptionHeader{}, fmt.Errorf("option header of %d bytes: %w", len(b), ErrShort)
	}
	if m := binary.BigEndian.Uint64(b); m != MagicIHaveOpt {
		return OptionHeader{}, fmt.Errorf("option magic %#x: %w", m, ErrBadMagic)
	}
	return OptionHeader{Code: Option(binary.BigEndian.Uint32(b[8:])), Length: binary.BigEndian.Uint32(b[12:])}, nil
}

// ReadOption reads one option from r: its header and data. Data longer than
// maxLen is not read and the error is ErrTooLong: the caller should drop the
// connection (the protocol document lets a server defend itself that way).
func ReadOption(r io.Reader, maxLen uint32) (OptionHeader, []byte, error) {
	var hb [OptionHeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return OptionHeader{}, nil, fmt.Errorf("read option header: %w", err)
	}
	h, err := ParseOptionHeader(hb[:])
	if err != nil {
		return h, nil, err
	}
	if h.Length > maxLen {
		return h, nil, fmt.Errorf("%v with %d bytes of data (max %d): %w", h.Code, h.Length, maxLen, ErrTooLong)
	}
	data := make([]byte, h.Length)
	if _, err := io.ReadFull(r, data); err != nil {
		return h, nil, fmt.Errorf("read %v data: %w", h.Code, err)
	}
	return h, data, nil
}

// checkString validates a protocol string: at most MaxString bytes, no NUL.
func checkString(what string, s []byte) error {
	if len(s) > MaxString {
		return fmt.Errorf("%s of %d bytes: %w", what, len(s), ErrMalformed)
	}
	if strings.IndexByte(string(s), 0) >= 0 {
		return fmt.Errorf("%s holds a NUL: %w", what, ErrMalformed)
	}
	return nil
}

// takeString reads a 4-byte length and that many bytes of string from b.
func takeString(what string, b []byte) (string, []byte, error) {
	if len(b) < 4 {
		return "", nil, fmt.Errorf("%s length: %w", what, ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return "", nil, fmt.Errorf("%s length %d, %d bytes left: %w", what, n, len(b)-4, ErrMalformed)
	}
	s := b[4 : 4+n]
	if err := checkString(what, s); err != nil {
		return "", nil, err
	}
	return string(s), b[4+n:], nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// InfoRequest is the data of NBD_OPT_INFO and NBD_OPT_GO.
type InfoRequest struct {
	Name  string     // export name; empty means the default export
	Infos []InfoType // information requested
}

// ParseInfoRequest parses the data of NBD_OPT_INFO / NBD_OPT_GO: name length
// (4), name, count K (2), K info types (2 each). Trailing bytes are
// malformed.
func ParseInfoRequest(data []byte) (InfoRequest, error) {
	name, rest, err := takeString("export name", data)
	if err != nil {
		return InfoRequest{}, err
	}
	if len(rest) < 2 {
		return InfoRequest{}, fmt.Errorf("info request count: %w", ErrMalformed)
	}
	k := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) != 2*k {
		return InfoRequest{}, fmt.Errorf("info request of %d types in %d bytes: %w", k, len(rest), ErrMalformed)
	}
	r := InfoRequest{Name: name, Infos: make([]InfoType, k)}
	for i := range r.Infos {
		r.Infos[i] = InfoType(binary.BigEndian.Uint16(rest[2*i:]))
	}
	return r, nil
}

// AppendInfoRequest appends the data of NBD_OPT_INFO / NBD_OPT_GO.
func AppendInfoRequest(b []byte, r InfoRequest) []byte {
	b = appendString(b, r.Name)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Infos)))
	for _, t := range r.Infos {
		b = binary.BigEndian.AppendUint16(b, uint16(t))
	}
	return b
}

// MetaContextRequest is the data of NBD_OPT_LIST_META_CONTEXT and
// NBD_OPT_SET_META_CONTEXT.
type MetaContextRequest struct {
	Name    string   // export name
	Queries []string // e.g. "base:allocation", or "base:" to list a namespace
}

// maxQueries bounds the number of queries one request may carry; each query
// takes at least 4 bytes, so this only matters for hostile counts.
const maxQueries = 1 << 16

// ParseMetaContextRequest parses the data of NBD_OPT_{LIST,SET}_META_CONTEXT:
// name length (4), name, query count Q (4), Q × (length (4), query).
func ParseMetaContextRequest(data []byte) (MetaContextRequest, error) {
	name, rest, err := takeString("export name", data)
	if err != nil {
		return MetaContextRequest{}, err
	}
	if len(rest) < 4 {
		return MetaContextRequest{}, fmt.Errorf("meta context query count: %w", ErrMalformed)
	}
	q := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if q > maxQueries || uint64(q)*4 > uint64(len(rest)) {
		return MetaContextRequest{}, fmt.Errorf("%d meta context queries in %d bytes: %w", q, len(rest), ErrMalformed)
	}
	r := MetaContextRequest{Name: name, Queries: make([]string, 0, q)}
	for range q {
		var s string
		if s, rest, err = takeString("meta context query", rest); err != nil {
			return MetaContextRequest{}, err
		}
		r.Queries = append(r.Queries, s)
	}
	if len(rest) != 0 {
		return MetaContextRequest{}, fmt.Errorf("%d bytes after the meta context queries: %w", len(rest), ErrMalformed)
	}
	return r, nil
}

// AppendMetaContextRequest appends the data of
// NBD_OPT_{LIST,SET}_META_CONTEXT.
func AppendMetaContextRequest(b []byte, r MetaContextRequest) []byte {
	b = appendString(b, r.Name)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Queries)))
	for _, q := range r.Queries {
		b = appendString(b, q)
	}
	return b
}
