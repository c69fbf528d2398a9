package pdu

import "fmt"

// SGL descriptor identifiers (SGL1 byte 15, SQE byte 39) the TCP transport
// uses.
const (
	// SGLInCapsule: data block, offset subtype: the data is in the capsule,
	// Addr is its offset in the in-capsule data area (ICDOFF 0).
	SGLInCapsule uint8 = 0x01
	// SGLTransport: transport data block, transport-specific subtype: the
	// data moves in C2HData, or H2CData after R2T.
	SGLTransport uint8 = 0x5A
)

// SGL is an SGL descriptor (16 bytes).
type SGL struct {
	Addr   uint64
	Length uint32
	ID     uint8 // bits 4-7 type, bits 0-3 subtype
}

// Type returns the descriptor type (high nibble of ID).
func (g SGL) Type() uint8 { return g.ID >> 4 }

// Subtype returns the descriptor subtype (low nibble of ID).
func (g SGL) Subtype() uint8 { return g.ID & 0xF }

// PSDT values (SQE flags bits 6-7).
const (
	PSDTPRP     uint8 = 0x00
	PSDTSGL     uint8 = 0x40 // SGL, metadata pointer is a buffer; what Linux sends
	PSDTSGLSegs uint8 = 0x80
)

// SQE is the 64-byte Submission Queue Entry.
//
//	0 OPC | 1 FLAGS | 2 CID | 4 NSID | 8 CDW2 | 12 CDW3 | 16 MPTR |
//	24 SGL1 (16) | 40 CDW10 | 44 CDW11 | 48 CDW12 | 52 CDW13 | 56 CDW14 | 60 CDW15
//
// Fabrics commands (opcode 0x7F) keep FCTYPE in byte 4, the low byte of
// NSID.
type SQE struct {
	Opcode uint8
	Flags  uint8
	CID    uint16
	NSID   uint32
	CDW2   uint32
	CDW3   uint32
	MPTR   uint64
	SGL    SGL
	CDW10  uint32
	CDW11  uint32
	CDW12  uint32
	CDW13  uint32
	CDW14  uint32
	CDW15  uint32
}

// Put encodes s into b[:64].
func (s *SQE) Put(b []byte) {
	_ = b[SQELen-1]
	b[0] = s.Opcode
	b[1] = s.Flags
	le.PutUint16(b[2:], s.CID)
	le.PutUint32(b[4:], s.NSID)
	le.PutUint32(b[8:], s.CDW2)
	le.PutUint32(b[12:], s.CDW3)
	le.PutUint64(b[16:], s.MPTR)
	le.PutUint64(b[24:], s.SGL.Addr)
	le.PutUint32(b[32:], s.SGL.Length)
	b[36], b[37], b[38] = 0, 0, 0
	b[39] = s.SGL.ID
	for i, v := range [6]uint32{s.CDW10, s.CDW11, s.CDW12, s.CDW13, s.CDW14, s.CDW15} {
		le.PutUint32(b[40+4*i:], v)
	}
}

// Parse decodes s from b[:64]. The three reserved SGL bytes are dropped.
func (s *SQE) Parse(b []byte) {
	_ = b[SQELen-1]
	s.Opcode = b[0]
	s.Flags = b[1]
	s.CID = le.Uint16(b[2:])
	s.NSID = le.Uint32(b[4:])
	s.CDW2 = le.Uint32(b[8:])
	s.CDW3 = le.Uint32(b[12:])
	s.MPTR = le.Uint64(b[16:])
	s.SGL = SGL{Addr: le.Uint64(b[24:]), Length: le.Uint32(b[32:]), ID: b[39]}
	s.CDW10 = le.Uint32(b[40:])
	s.CDW11 = le.Uint32(b[44:])
	s.CDW12 = le.Uint32(b[48:])
	s.CDW13 = le.Uint32(b[52:])
	s.CDW14 = le.Uint32(b[56:])
	s.CDW15 = le.Uint32(b[60:])
}

// FCType returns the fabrics command type (byte 4) of a fabrics SQE.
func (s *SQE) FCType() uint8 { return uint8(s.NSID) }

// SLBA returns the starting LBA of a Read/Write/Write Zeroes (CDW10-11).
func (s *SQE) SLBA() uint64 { return uint64(s.CDW10) | uint64(s.CDW11)<<32 }

// NLB returns the number of blocks of a Read/Write/Write Zeroes: the 0's
// based NLB field of CDW12 plus one.
func (s *SQE) NLB() uint32 { return s.CDW12&0xFFFF + 1 }

// SetRW sets SLBA and the block count n (1..65536) of a Read/Write/Write
// Zeroes, keeping the control bits of CDW12.
func (s *SQE) SetRW(slba uint64, n uint32) {
	s.CDW10, s.CDW11 = uint32(slba), uint32(slba>>32)
	s.CDW12 = s.CDW12&0xFFFF0000 | (n-1)&0xFFFF
}

// Read/Write/Write Zeroes control bits (CDW12 bits 16-31).
const (
	RWFUA  uint32 = 1 << 30 // Force Unit Access
	RWLR   uint32 = 1 << 31 // Limited Retry
	WZDEAC uint32 = 1 << 25 // Write Zeroes: deallocate
)

// CQE is the 16-byte Completion Queue Entry.
//
//	0 DW0 | 4 DW1 | 8 SQHD | 10 SQID | 12 CID | 14 STATUS
type CQE struct {
	DW0    uint32
	DW1    uint32
	SQHD   uint16
	SQID   uint16
	CID    uint16
	Status Status
}

// Put encodes c into b[:16].
func (c *CQE) Put(b []byte) {
	_ = b[CQELen-1]
	le.PutUint32(b[0:], c.DW0)
	le.PutUint32(b[4:], c.DW1)
	le.PutUint16(b[8:], c.SQHD)
	le.PutUint16(b[10:], c.SQID)
	le.PutUint16(b[12:], c.CID)
	le.PutUint16(b[14:], uint16(c.Status))
}

// Parse decodes c from b[:16].
func (c *CQE) Parse(b []byte) {
	_ = b[CQELen-1]
	c.DW0 = le.Uint32(b[0:])
	c.DW1 = le.Uint32(b[4:])
	c.SQHD = le.Uint16(b[8:])
	c.SQID = le.Uint16(b[10:])
	c.CID = le.Uint16(b[12:])
	c.Status = Status(le.Uint16(b[14:]))
}

// Status is the CQE status field exactly as on the wire (bytes 14-15): bit
// 0 phase, bits 1-8 SC, bits 9-11 SCT, bits 12-13 CRD, bit 14 More, bit 15
// DNR.
type Status uint16

// StatusCode is a status without its flags, written SCT<<8 | SC as the
// Linux kernel and the tables of the specification do (0x302 = SCT 3, SC
// 0x02).
type StatusCode uint16

// MakeStatus builds a wire status from a code and the DNR bit.
func MakeStatus(c StatusCode, dnr bool) Status {
	s := Status(c&0x7FF) << 1
	if dnr {
		s |= StatusDNR
	}
	return s
}

// Status flag bits.
const (
	StatusPhase Status = 1 << 0
	StatusMore  Status = 1 << 14
	StatusDNR   Status = 1 << 15
)

// Code returns SCT<<8 | SC.
func (s Status) Code() StatusCode { return StatusCode(s>>1) & 0x7FF }

// SCT returns the status code type.
func (s Status) SCT() uint8 { return uint8(s>>9) & 0x7 }

// SC returns the status code.
func (s Status) SC() uint8 { return uint8(s >> 1) }

// CRD returns the command retry delay index (0-3).
func (s Status) CRD() uint8 { return uint8(s>>12) & 0x3 }

// DNR reports the Do Not Retry bit.
func (s Status) DNR() bool { return s&StatusDNR != 0 }

// More reports the More bit.
func (s Status) More() bool { return s&StatusMore != 0 }

// Success reports a successful completion (SCT 0, SC 0).
func (s Status) Success() bool { return s.Code() == SCSuccess }

// WithDNR returns s with DNR set.
func (s Status) WithDNR() Status { return s | StatusDNR }

func (s Status) String() string {
	str := s.Code().String()
	if s.DNR() {
		str += " dnr"
	}
	if s.More() {
		str += " more"
	}
	return str
}

// Status codes (A.4.8; NVMe base spec, status code tables).
const (
	SCSuccess                StatusCode = 0x000
	SCInvalidOpcode          StatusCode = 0x001
	SCInvalidField           StatusCode = 0x002
	SCCIDConflict            StatusCode = 0x003
	SCDataTransferError      StatusCode = 0x004
	SCPowerLoss              StatusCode = 0x005
	SCInternalError          StatusCode = 0x006
	SCAbortRequested         StatusCode = 0x007
	SCAbortSQDeleted         StatusCode = 0x008
	SCInvalidNamespace       StatusCode = 0x00B
	SCCommandSequenceError   StatusCode = 0x00C
	SCInvalidSGLSegment      StatusCode = 0x00D
	SCDataSGLLengthInvalid   StatusCode = 0x00F
	SCSGLTypeInvalid         StatusCode = 0x011
	SCSGLOffsetInvalid       StatusCode = 0x016
	SCHostIDInconsistent     StatusCode = 0x018
	SCKeepAliveExpired       StatusCode = 0x019
	SCKeepAliveInvalid       StatusCode = 0x01A
	SCNamespaceWriteProtect  StatusCode = 0x020
	SCTransientTransport     StatusCode = 0x022
	SCLBAOutOfRange          StatusCode = 0x080
	SCCapacityExceeded       StatusCode = 0x081
	SCNamespaceNotReady      StatusCode = 0x082
	SCReservationConflict    StatusCode = 0x083
	SCInvalidQueueID         StatusCode = 0x101
	SCInvalidQueueSize       StatusCode = 0x102
	SCAERLimitExceeded       StatusCode = 0x105
	SCInvalidLogPage         StatusCode = 0x109
	SCConnectIncompatFormat  StatusCode = 0x180
	SCConnectControllerBusy  StatusCode = 0x181
	SCConnectInvalidParam    StatusCode = 0x182
	SCConnectRestartDisc     StatusCode = 0x183
	SCConnectInvalidHost     StatusCode = 0x184
	SCAuthRequired           StatusCode = 0x191 // in-band authentication required
	SCWriteFault             StatusCode = 0x280
	SCUnrecoveredReadError   StatusCode = 0x281
	SCInternalPathError      StatusCode = 0x300
	SCANAPersistentLoss      StatusCode = 0x301
	SCANAInaccessible        StatusCode = 0x302
	SCANATransition          StatusCode = 0x303
	SCControllerPathingError StatusCode = 0x360
	SCHostPathingError       StatusCode = 0x370
	SCAbortedByHost          StatusCode = 0x371
)

// SCT values.
const (
	SCTGeneric         uint8 = 0
	SCTCommandSpecific uint8 = 1
	SCTMedia           uint8 = 2
	SCTPath            uint8 = 3
)

// SCT returns the status code type of c.
func (c StatusCode) SCT() uint8 { return uint8(c>>8) & 0x7 }

// IsPathError reports a path-related status (SCT 3): the command may
// succeed on another path.
func (c StatusCode) IsPathError() bool { return c.SCT() == SCTPath }

// IsANAError reports an ANA status (0x301-0x303).
func (c StatusCode) IsANAError() bool { return c >= SCANAPersistentLoss && c <= SCANATransition }

func (c StatusCode) String() string {
	switch c {
	case SCSuccess:
		return "success"
	case SCInvalidOpcode:
		return "invalid opcode"
	case SCInvalidField:
		return "invalid field"
	case SCDataTransferError:
		return "data transfer error"
	case SCInternalError:
		return "internal error"
	case SCAbortSQDeleted:
		return "aborted: sq deleted"
	case SCInvalidNamespace:
		return "invalid namespace"
	case SCCommandSequenceError:
		return "command sequence error"
	case SCAuthRequired:
		return "authentication required"
	case SCDataSGLLengthInvalid:
		return "data sgl length invalid"
	case SCSGLTypeInvalid:
		return "sgl descriptor type invalid"
	case SCSGLOffsetInvalid:
		return "sgl offset invalid"
	case SCLBAOutOfRange:
		return "lba out of range"
	case SCNamespaceNotReady:
		return "namespace not ready"
	case SCConnectInvalidParam:
		return "connect: invalid parameters"
	case SCConnectInvalidHost:
		return "connect: invalid host"
	case SCANAPersistentLoss:
		return "ana persistent loss"
	case SCANAInaccessible:
		return "ana inaccessible"
	case SCANATransition:
		return "ana transition"
	case SCWriteFault:
		return "write fault"
	case SCUnrecoveredReadError:
		return "unrecovered read error"
	}
	return fmt.Sprintf("status 0x%03x", uint16(c))
}
