package pdu

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Type is the PDU type (common header byte 0).
type Type uint8

// PDU types (NVMe/TCP transport spec, PDU type table).
const (
	TypeICReq       Type = 0x00
	TypeICResp      Type = 0x01
	TypeH2CTermReq  Type = 0x02
	TypeC2HTermReq  Type = 0x03
	TypeCapsuleCmd  Type = 0x04
	TypeCapsuleResp Type = 0x05
	TypeH2CData     Type = 0x06
	TypeC2HData     Type = 0x07
	TypeR2T         Type = 0x09
)

func (t Type) String() string {
	switch t {
	case TypeICReq:
		return "ICReq"
	case TypeICResp:
		return "ICResp"
	case TypeH2CTermReq:
		return "H2CTermReq"
	case TypeC2HTermReq:
		return "C2HTermReq"
	case TypeCapsuleCmd:
		return "CapsuleCmd"
	case TypeCapsuleResp:
		return "CapsuleResp"
	case TypeH2CData:
		return "H2CData"
	case TypeC2HData:
		return "C2HData"
	case TypeR2T:
		return "R2T"
	}
	return fmt.Sprintf("Type(0x%02x)", uint8(t))
}

// Flags are the common header flag bits (byte 1).
type Flags uint8

// Flag bits.
const (
	FlagHDGST   Flags = 0x01 // a header digest follows the header
	FlagDDGST   Flags = 0x02 // a data digest follows the data
	FlagLastPDU Flags = 0x04 // last data PDU of the command (H2C: of the R2T)
	FlagSuccess Flags = 0x08 // C2HData only, with LastPDU: no CapsuleResp follows
)

// Sizes.
const (
	CommonHeaderLen = 8
	ICLen           = 128 // ICReq/ICResp hlen and plen
	TermReqHdrLen   = 24
	TermReqMaxData  = 128 // max bytes of the offending PDU header in a TermReq
	CapsuleCmdLen   = 72
	CapsuleRespLen  = 24
	DataHdrLen      = 24 // H2CData, C2HData
	R2THdrLen       = 24
	DigestLen       = 4
	// MaxHeaderLen is the largest header ReadHeader stores: an ICReq (128);
	// a CapsuleCmd with header digest takes 76.
	MaxHeaderLen = ICLen
	SQELen       = 64
	CQELen       = 16
)

// Digests says which digests were negotiated by ICReq/ICResp (DGST byte).
type Digests struct {
	Header bool // HDGST: bit 0
	Data   bool // DDGST: bit 1
}

// Byte returns the DGST byte of an ICReq/ICResp.
func (d Digests) Byte() uint8 {
	var b uint8
	if d.Header {
		b |= 1
	}
	if d.Data {
		b |= 2
	}
	return b
}

// DigestsFromByte decodes the DGST byte of an ICReq/ICResp.
func DigestsFromByte(b uint8) Digests {
	return Digests{Header: b&1 != 0, Data: b&2 != 0}
}

// Header is the 8-byte common header.
type Header struct {
	Type  Type
	Flags Flags
	HLen  uint8
	PDO   uint8
	PLen  uint32
}

// Put writes h into b[:8].
func (h Header) Put(b []byte) {
	_ = b[7]
	b[0] = byte(h.Type)
	b[1] = byte(h.Flags)
	b[2] = h.HLen
	b[3] = h.PDO
	binary.LittleEndian.PutUint32(b[4:8], h.PLen)
}

// ParseHeader decodes the common header from b[:8] without validating it.
func ParseHeader(b []byte) Header {
	_ = b[7]
	return Header{
		Type:  Type(b[0]),
		Flags: Flags(b[1]),
		HLen:  b[2],
		PDO:   b[3],
		PLen:  binary.LittleEndian.Uint32(b[4:8]),
	}
}

// HDigestLen is 4 when the header carries a header digest, else 0.
func (h Header) HDigestLen() int {
	if h.Flags&FlagHDGST != 0 {
		return DigestLen
	}
	return 0
}

// DDigestLen is 4 when the data carries a data digest, else 0.
func (h Header) DDigestLen() int {
	if h.Flags&FlagDDGST != 0 && h.DataLen() > 0 {
		return DigestLen
	}
	return 0
}

// DataLen is the number of data bytes the PDU carries (for a TermReq: the
// copied header bytes). It is meaningful for a header ReadHeader accepted.
func (h Header) DataLen() int {
	if h.Type == TypeH2CTermReq || h.Type == TypeC2HTermReq {
		return int(h.PLen) - int(h.HLen)
	}
	if h.PDO == 0 {
		return 0
	}
	n := int(h.PLen) - int(h.PDO)
	if h.Flags&FlagDDGST != 0 {
		n -= DigestLen
	}
	return n
}

// PadLen is the number of padding bytes between the header (and its digest)
// and the data.
func (h Header) PadLen() int {
	if h.PDO == 0 || h.Type == TypeH2CTermReq || h.Type == TypeC2HTermReq {
		return 0
	}
	return int(h.PDO) - int(h.HLen) - h.HDigestLen()
}

// typeRule describes what a PDU type may carry.
type typeRule struct {
	hlen    uint8
	digests bool // HDGST (and DDGST with data) apply
	data    int  // 0 none, 1 optional, 2 required
}

func ruleFor(t Type) (typeRule, bool) {
	switch t {
	case TypeICReq, TypeICResp:
		return typeRule{hlen: ICLen}, true
	case TypeH2CTermReq, TypeC2HTermReq:
		return typeRule{hlen: TermReqHdrLen}, true
	case TypeCapsuleCmd:
		return typeRule{hlen: CapsuleCmdLen, digests: true, data: 1}, true
	case TypeCapsuleResp:
		return typeRule{hlen: CapsuleRespLen, digests: true}, true
	case TypeH2CData, TypeC2HData:
		return typeRule{hlen: DataHdrLen, digests: true, data: 2}, true
	case TypeR2T:
		return typeRule{hlen: R2THdrLen, digests: true}, true
	}
	return typeRule{}, false
}

// crc32c is the NVMe/TCP digest: CRC32C (Castagnoli), the standard
// initial value and final xor. MakeTable returns a shared, read-only table
// for Castagnoli.
func crc32c(b []byte) uint32 {
	return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
}

// Digest returns the NVMe/TCP digest (CRC32C) of b.
func Digest(b []byte) uint32 { return crc32c(b) }

// DigestUpdate extends a running digest crc (start with 0) by b.
func DigestUpdate(crc uint32, b []byte) uint32 {
	return crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), b)
}
