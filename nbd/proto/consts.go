package proto

import "fmt"

// Magic numbers ("Handshake", "Transmission").
const (
	MagicNBD             uint64 = 0x4E42444D41474943 // "NBDMAGIC"
	MagicIHaveOpt        uint64 = 0x49484156454F5054 // "IHAVEOPT"
	MagicOptionReply     uint64 = 0x0003E889045565A9
	MagicRequest         uint32 = 0x25609513
	MagicSimpleReply     uint32 = 0x67446698
	MagicStructuredReply uint32 = 0x668E33EF
	MagicExtendedRequest uint32 = 0x21E41C71
)

// HandshakeFlags are the 16 bits the server sends in its greeting.
type HandshakeFlags uint16

// Handshake flags ("Handshake flags").
const (
	FlagFixedNewstyle HandshakeFlags = 1 << 0
	FlagNoZeroes      HandshakeFlags = 1 << 1
)

// ClientFlags are the 32 bits the client sends after the greeting.
type ClientFlags uint32

// Client flags ("Client flags").
const (
	FlagCFixedNewstyle ClientFlags = 1 << 0
	FlagCNoZeroes      ClientFlags = 1 << 1
)

// TransmissionFlags describe an export ("Transmission flags").
type TransmissionFlags uint16

// Transmission flags.
const (
	FlagHasFlags        TransmissionFlags = 1 << 0
	FlagReadOnly        TransmissionFlags = 1 << 1
	FlagSendFlush       TransmissionFlags = 1 << 2
	FlagSendFUA         TransmissionFlags = 1 << 3
	FlagRotational      TransmissionFlags = 1 << 4
	FlagSendTrim        TransmissionFlags = 1 << 5
	FlagSendWriteZeroes TransmissionFlags = 1 << 6
	FlagSendDF          TransmissionFlags = 1 << 7
	FlagCanMultiConn    TransmissionFlags = 1 << 8
	FlagSendResize      TransmissionFlags = 1 << 9
	FlagSendCache       TransmissionFlags = 1 << 10
	FlagSendFastZero    TransmissionFlags = 1 << 11
)

// Option is an option code of the handshake ("Option types").
type Option uint32

// Options.
const (
	OptExportName      Option = 1
	OptAbort           Option = 2
	OptList            Option = 3
	OptPeekExport      Option = 4
	OptStartTLS        Option = 5
	OptInfo            Option = 6
	OptGo              Option = 7
	OptStructuredReply Option = 8
	OptListMetaContext Option = 9
	OptSetMetaContext  Option = 10
	OptExtendedHeaders Option = 11
)

func (o Option) String() string {
	switch o {
	case OptExportName:
		return "NBD_OPT_EXPORT_NAME"
	case OptAbort:
		return "NBD_OPT_ABORT"
	case OptList:
		return "NBD_OPT_LIST"
	case OptPeekExport:
		return "NBD_OPT_PEEK_EXPORT"
	case OptStartTLS:
		return "NBD_OPT_STARTTLS"
	case OptInfo:
		return "NBD_OPT_INFO"
	case OptGo:
		return "NBD_OPT_GO"
	case OptStructuredReply:
		return "NBD_OPT_STRUCTURED_REPLY"
	case OptListMetaContext:
		return "NBD_OPT_LIST_META_CONTEXT"
	case OptSetMetaContext:
		return "NBD_OPT_SET_META_CONTEXT"
	case OptExtendedHeaders:
		return "NBD_OPT_EXTENDED_HEADERS"
	}
	return fmt.Sprintf("NBD_OPT_%d", uint32(o))
}

// ReplyType is the type of an option reply ("Option reply types").
type ReplyType uint32

// Option reply types. Errors have bit 31 set.
const (
	RepAck              ReplyType = 1
	RepServer           ReplyType = 2
	RepInfo             ReplyType = 3
	RepMetaContext      ReplyType = 4
	RepErrUnsup         ReplyType = 1<<31 + 1
	RepErrPolicy        ReplyType = 1<<31 + 2
	RepErrInvalid       ReplyType = 1<<31 + 3
	RepErrPlatform      ReplyType = 1<<31 + 4
	RepErrTLSReqd       ReplyType = 1<<31 + 5
	RepErrUnknown       ReplyType = 1<<31 + 6
	RepErrShutdown      ReplyType = 1<<31 + 7
	RepErrBlockSizeReqd ReplyType = 1<<31 + 8
	RepErrTooBig        ReplyType = 1<<31 + 9
	RepErrExtHeaderReqd ReplyType = 1<<31 + 10
)

// IsError reports whether t is an error reply (bit 31 set).
func (t ReplyType) IsError() bool { return t&(1<<31) != 0 }

// InfoType is the type of an NBD_REP_INFO reply ("NBD_INFO" types of
// NBD_OPT_INFO and NBD_OPT_GO).
type InfoType uint16

// Info types.
const (
	InfoExport      InfoType = 0
	InfoName        InfoType = 1
	InfoDescription InfoType = 2
	InfoBlockSize   InfoType = 3
)

// Cmd is a request type ("Request types").
type Cmd uint16

// Commands.
const (
	CmdRead        Cmd = 0
	CmdWrite       Cmd = 1
	CmdDisc        Cmd = 2
	CmdFlush       Cmd = 3
	CmdTrim        Cmd = 4
	CmdCache       Cmd = 5
	CmdWriteZeroes Cmd = 6
	CmdBlockStatus Cmd = 7
	CmdResize      Cmd = 8
)

func (c Cmd) String() string {
	switch c {
	case CmdRead:
		return "NBD_CMD_READ"
	case CmdWrite:
		return "NBD_CMD_WRITE"
	case CmdDisc:
		return "NBD_CMD_DISC"
	case CmdFlush:
		return "NBD_CMD_FLUSH"
	case CmdTrim:
		return "NBD_CMD_TRIM"
	case CmdCache:
		return "NBD_CMD_CACHE"
	case CmdWriteZeroes:
		return "NBD_CMD_WRITE_ZEROES"
	case CmdBlockStatus:
		return "NBD_CMD_BLOCK_STATUS"
	case CmdResize:
		return "NBD_CMD_RESIZE"
	}
	return fmt.Sprintf("NBD_CMD_%d", uint16(c))
}

// CmdFlags are the flags of a request ("Command flags").
type CmdFlags uint16

// Command flags.
const (
	CmdFlagFUA        CmdFlags = 1 << 0
	CmdFlagNoHole     CmdFlags = 1 << 1
	CmdFlagDF         CmdFlags = 1 << 2
	CmdFlagReqOne     CmdFlags = 1 << 3
	CmdFlagFastZero   CmdFlags = 1 << 4
	CmdFlagPayloadLen CmdFlags = 1 << 5
)

// ChunkType is the type of a structured reply chunk ("Structured reply
// types").
type ChunkType uint16

// Chunk types. Error chunk types have bit 15 set.
const (
	ChunkNone           ChunkType = 0
	ChunkOffsetData     ChunkType = 1
	ChunkOffsetHole     ChunkType = 2
	ChunkBlockStatus    ChunkType = 5
	ChunkBlockStatusExt ChunkType = 6
	ChunkError          ChunkType = 1<<15 + 1
	ChunkErrorOffset    ChunkType = 1<<15 + 2
)

// IsError reports whether t is an error chunk type (bit 15 set).
func (t ChunkType) IsError() bool { return t&(1<<15) != 0 }

// ReplyFlagDone marks the last chunk of a structured reply ("Structured reply
// flags").
const ReplyFlagDone uint16 = 1 << 0

// Status flags of the base:allocation metadata context ("Metadata contexts").
const (
	StateHole uint32 = 1 << 0
	StateZero uint32 = 1 << 1
)

// MetaContextBaseAllocation is the name of the one standard metadata context.
const MetaContextBaseAllocation = "base:allocation"

// Errno is an error value sent in a reply ("Error values").
type Errno uint32

// Error values.
const (
	EPERM     Errno = 1
	EIO       Errno = 5
	ENOMEM    Errno = 12
	EINVAL    Errno = 22
	ENOSPC    Errno = 28
	EOVERFLOW Errno = 75
	ENOTSUP   Errno = 95
	ESHUTDOWN Errno = 108
)

func (e Errno) String() string {
	switch e {
	case 0:
		return "OK"
	case EPERM:
		return "EPERM"
	case EIO:
		return "EIO"
	case ENOMEM:
		return "ENOMEM"
	case EINVAL:
		return "EINVAL"
	case ENOSPC:
		return "ENOSPC"
	case EOVERFLOW:
		return "EOVERFLOW"
	case ENOTSUP:
		return "ENOTSUP"
	case ESHUTDOWN:
		return "ESHUTDOWN"
	}
	return fmt.Sprintf("errno %d", uint32(e))
}

// Sizes of the fixed-length messages.
const (
	GreetingSize          = 18
	ClientFlagsSize       = 4
	OptionHeaderSize      = 16
	OptionReplyHeaderSize = 20
	ExportNameReplySize   = 10 // without the 124 zero bytes
	RequestSize           = 28
	SimpleReplySize       = 16
	ChunkHeaderSize       = 20
)

// Limits the protocol document sets for strings and payloads.
const (
	// MaxString is the longest string (export name, context name, message).
	MaxString = 4096
	// DefaultMaxPayload is the maximum payload a client may assume when no
	// block size was advertised, and the length below which a payload
	// should not be considered a denial of service.
	DefaultMaxPayload = 32 << 20
)
