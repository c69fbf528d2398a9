package proto

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// OptionReplyHeader is the fixed part of an option reply.
type OptionReplyHeader struct {
	Option Option
	Type   ReplyType
	Length uint32 // of the data that follows
}

func appendOptionReplyHeader(b []byte, opt Option, typ ReplyType, n int) []byte {
	b = binary.BigEndian.AppendUint64(b, MagicOptionReply)
	b = binary.BigEndian.AppendUint32(b, uint32(opt))
	b = binary.BigEndian.AppendUint32(b, uint32(typ))
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// AppendOptionReply appends an option reply of type typ with data.
func AppendOptionReply(b []byte, opt Option, typ ReplyType, data []byte) []byte {
	b = appendOptionReplyHeader(b, opt, typ, len(data))
	return append(b, data...)
}

// AppendAck appends NBD_REP_ACK for opt.
func AppendAck(b []byte, opt Option) []byte { return appendOptionReplyHeader(b, opt, RepAck, 0) }

// AppendOptionError appends an error reply with a human-readable message,
// cut to MaxString bytes.
func AppendOptionError(b []byte, opt Option, typ ReplyType, msg string) []byte {
	msg = clip(msg)
	b = appendOptionReplyHeader(b, opt, typ, len(msg))
	return append(b, msg...)
}

// AppendServer appends an NBD_REP_SERVER reply to NBD_OPT_LIST: name length,
// name, then the description.
func AppendServer(b []byte, name, description string) []byte {
	description = clip(description)
	b = appendOptionReplyHeader(b, OptList, RepServer, 4+len(name)+len(description))
	b = appendString(b, name)
	return append(b, description...)
}

// AppendMetaContext appends an NBD_REP_META_CONTEXT reply: context ID, name.
func AppendMetaContext(b []byte, opt Option, id uint32, name string) []byte {
	b = appendOptionReplyHeader(b, opt, RepMetaContext, 4+len(name))
	b = binary.BigEndian.AppendUint32(b, id)
	return append(b, name...)
}

// AppendInfoExport appends the NBD_INFO_EXPORT reply (12 bytes of data: type,
// size, transmission flags), mandatory before the ACK of INFO and GO.
func AppendInfoExport(b []byte, opt Option, size uint64, flags TransmissionFlags) []byte {
	b = appendOptionReplyHeader(b, opt, RepInfo, 12)
	b = binary.BigEndian.AppendUint16(b, uint16(InfoExport))
	b = binary.BigEndian.AppendUint64(b, size)
	return binary.BigEndian.AppendUint16(b, uint16(flags))
}

// AppendInfoName appends the NBD_INFO_NAME reply (the canonical name).
func AppendInfoName(b []byte, opt Option, name string) []byte {
	return appendInfoString(b, opt, InfoName, name)
}

// AppendInfoDescription appends the NBD_INFO_DESCRIPTION reply.
func AppendInfoDescription(b []byte, opt Option, desc string) []byte {
	return appendInfoString(b, opt, InfoDescription, clip(desc))
}

func appendInfoString(b []byte, opt Option, t InfoType, s string) []byte {
	b = appendOptionReplyHeader(b, opt, RepInfo, 2+len(s))
	b = binary.BigEndian.AppendUint16(b, uint16(t))
	return append(b, s...)
}

// BlockSize is the payload of NBD_INFO_BLOCK_SIZE ("Block size
// constraints").
type BlockSize struct {
	Min, Preferred, Max uint32
}

// Validate checks the rules of "Block size constraints": the minimum is a
// power of two from 1 to 64 KiB; the preferred size a power of two, at least
// 512 and the minimum; the maximum at least the preferred size and either a
// multiple of the minimum or 0xFFFFFFFF. libnbd ignores a violating
// advertisement, so the server checks its own.
func (s BlockSize) Validate() error {
	pow2 := func(v uint32) bool { return bits.OnesCount32(v) == 1 }
	switch {
	case !pow2(s.Min) || s.Min > 64<<10:
		return fmt.Errorf("minimum block size %d is not a power of two up to 64 KiB: %w", s.Min, ErrMalformed)
	case !pow2(s.Preferred) || s.Preferred < max(s.Min, 512):
		return fmt.Errorf("preferred block size %d is not a power of two >= max(min %d, 512): %w", s.Preferred, s.Min, ErrMalformed)
	case s.Max < s.Preferred || (s.Max%s.Min != 0 && s.Max != 0xFFFFFFFF):
		return fmt.Errorf("maximum payload %d is below preferred %d or not a multiple of min %d: %w", s.Max, s.Preferred, s.Min, ErrMalformed)
	}
	return nil
}

// AppendInfoBlockSize appends the NBD_INFO_BLOCK_SIZE reply (14 bytes).
func AppendInfoBlockSize(b []byte, opt Option, s BlockSize) []byte {
	b = appendOptionReplyHeader(b, opt, RepInfo, 14)
	b = binary.BigEndian.AppendUint16(b, uint16(InfoBlockSize))
	b = binary.BigEndian.AppendUint32(b, s.Min)
	b = binary.BigEndian.AppendUint32(b, s.Preferred)
	return binary.BigEndian.AppendUint32(b, s.Max)
}

// AppendExportNameReply appends the answer to a successful
// NBD_OPT_EXPORT_NAME: size, flags and, unless noZeroes, 124 zero bytes.
func AppendExportNameReply(b []byte, size uint64, flags TransmissionFlags, noZeroes bool) []byte {
	b = binary.BigEndian.AppendUint64(b, size)
	b = binary.BigEndian.AppendUint16(b, uint16(flags))
	if !noZeroes {
		b = append(b, make([]byte, 124)...)
	}
	return b
}

// ParseOptionReplyHeader parses the 20-byte header of an option reply (the
// client side).
func ParseOptionReplyHeader(b []byte) (OptionReplyHeader, error) {
	if len(b) < OptionReplyHeaderSize {
		return OptionReplyHeader{}, fmt.Errorf("option reply header of %d bytes: %w", len(b), ErrShort)
	}
	if m := binary.BigEndian.Uint64(b); m != MagicOptionReply {
		return OptionReplyHeader{}, fmt.Errorf("option reply magic %#x: %w", m, ErrBadMagic)
	}
	return OptionReplyHeader{
		Option: Option(binary.BigEndian.Uint32(b[8:])),
		Type:   ReplyType(binary.BigEndian.Uint32(b[12:])),
		Length: binary.BigEndian.Uint32(b[16:]),
	}, nil
}

// Info is a parsed NBD_REP_INFO reply; which fields are set depends on Type.
type Info struct {
	Type        InfoType
	Size        uint64            // InfoExport
	Flags       TransmissionFlags // InfoExport
	Name        string            // InfoName
	Description string            // InfoDescription
	BlockSize   BlockSize         // InfoBlockSize
}

// ParseInfo parses the data of an NBD_REP_INFO reply, checking the lengths
// libnbd checks (12 bytes for EXPORT, 14 for BLOCK_SIZE). Unknown types are
// returned with only Type set.
func ParseInfo(data []byte) (Info, error) {
	if len(data) < 2 {
		return Info{}, fmt.Errorf("info reply of %d bytes: %w", len(data), ErrMalformed)
	}
	in := Info{Type: InfoType(binary.BigEndian.Uint16(data))}
	p := data[2:]
	switch in.Type {
	case InfoExport:
		if len(p) != 10 {
			return in, fmt.Errorf("NBD_INFO_EXPORT of %d bytes: %w", len(data), ErrMalformed)
		}
		in.Size, in.Flags = binary.BigEndian.Uint64(p), TransmissionFlags(binary.BigEndian.Uint16(p[8:]))
	case InfoName, InfoDescription:
		if err := checkString("info string", p); err != nil {
			return in, err
		}
		in.Name = string(p)
		if in.Type == InfoDescription {
			in.Name, in.Description = "", string(p)
		}
	case InfoBlockSize:
		if len(p) != 12 {
			return in, fmt.Errorf("NBD_INFO_BLOCK_SIZE of %d bytes: %w", len(data), ErrMalformed)
		}
		in.BlockSize = BlockSize{Min: binary.BigEndian.Uint32(p), Preferred: binary.BigEndian.Uint32(p[4:]), Max: binary.BigEndian.Uint32(p[8:])}
	}
	return in, nil
}

// ParseServer parses the data of an NBD_REP_SERVER reply.
func ParseServer(data []byte) (name, description string, err error) {
	name, rest, err := takeString("export name", data)
	if err != nil {
		return "", "", err
	}
	return name, string(rest), nil
}

// ParseMetaContext parses the data of an NBD_REP_META_CONTEXT reply.
func ParseMetaContext(data []byte) (id uint32, name string, err error) {
	if len(data) < 4 {
		return 0, "", fmt.Errorf("meta context reply of %d bytes: %w", len(data), ErrMalformed)
	}
	if err := checkString("meta context name", data[4:]); err != nil {
		return 0, "", err
	}
	return binary.BigEndian.Uint32(data), string(data[4:]), nil
}

// clip cuts a human-readable string to MaxString bytes.
func clip(s string) string {
	if len(s) > MaxString {
		return s[:MaxString]
	}
	return s
}
