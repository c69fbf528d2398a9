package pdu

import "encoding/binary"

var le = binary.LittleEndian

// ICReq is the Initialize Connection Request (type 0x00, 128 bytes).
type ICReq struct {
	PFV     uint16  // PDU format version, 0
	HPDA    uint8   // host PDU data alignment, 0's based dwords; Linux sends 0
	Digests Digests // requested digests
	MaxR2T  uint32  // max outstanding R2Ts per command, 0's based
}

// ICResp is the Initialize Connection Response (type 0x01, 128 bytes).
type ICResp struct {
	PFV        uint16
	CPDA       uint8   // controller PDU data alignment; must be 0 for Linux hosts
	Digests    Digests // the digests granted (Linux wants exactly those asked)
	MaxH2CData uint32  // max data bytes in one H2CData PDU; >= 4096, multiple of 4
}

func appendIC(b []byte, t Type, pfv uint16, pda uint8, dg Digests, v uint32) []byte {
	var p [ICLen]byte
	Header{Type: t, HLen: ICLen, PLen: ICLen}.Put(p[:])
	le.PutUint16(p[8:], pfv)
	p[10] = pda
	p[11] = dg.Byte()
	le.PutUint32(p[12:], v)
	return append(b, p[:]...)
}

// Append appends the 128-byte ICReq PDU to b.
func (m ICReq) Append(b []byte) []byte {
	return appendIC(b, TypeICReq, m.PFV, m.HPDA, m.Digests, m.MaxR2T)
}

// Append appends the 128-byte ICResp PDU to b.
func (m ICResp) Append(b []byte) []byte {
	return appendIC(b, TypeICResp, m.PFV, m.CPDA, m.Digests, m.MaxH2CData)
}

// ParseICReq decodes an ICReq from its 128 header bytes.
func ParseICReq(hdr []byte) ICReq {
	_ = hdr[ICLen-1]
	return ICReq{PFV: le.Uint16(hdr[8:]), HPDA: hdr[10], Digests: DigestsFromByte(hdr[11]), MaxR2T: le.Uint32(hdr[12:])}
}

// ParseICResp decodes an ICResp from its 128 header bytes.
func ParseICResp(hdr []byte) ICResp {
	_ = hdr[ICLen-1]
	return ICResp{PFV: le.Uint16(hdr[8:]), CPDA: hdr[10], Digests: DigestsFromByte(hdr[11]), MaxH2CData: le.Uint32(hdr[12:])}
}

// TermReq is an H2CTermReq or C2HTermReq: the fatal error status, its
// information and a copy of the offending PDU header.
type TermReq struct {
	FES  uint16
	FEI  uint32
	Data []byte // at most 128 bytes are sent
}

// AppendTermReq appends a TermReq PDU of type t (TypeH2CTermReq or
// TypeC2HTermReq) to b. TermReqs carry no digests; pdo is 0 and FEI is a
// 32-bit field at offset 10.
func AppendTermReq(b []byte, t Type, m TermReq) []byte {
	d := m.Data
	if len(d) > TermReqMaxData {
		d = d[:TermReqMaxData]
	}
	var p [TermReqHdrLen]byte
	Header{Type: t, HLen: TermReqHdrLen, PLen: uint32(TermReqHdrLen + len(d))}.Put(p[:])
	le.PutUint16(p[8:], m.FES)
	le.PutUint32(p[10:], m.FEI)
	b = append(b, p[:]...)
	return append(b, d...)
}

// TermReq returns the TermReq that reports e.
func (e *FatalError) TermReq() TermReq {
	return TermReq{FES: e.FES, FEI: e.FEI, Data: e.Hdr}
}

// ParseTermReq decodes a TermReq from its header and error data.
func ParseTermReq(hdr, data []byte) TermReq {
	_ = hdr[TermReqHdrLen-1]
	return TermReq{FES: le.Uint16(hdr[8:]), FEI: le.Uint32(hdr[10:]), Data: data}
}

// DataHdr is the type-specific header of H2CData and C2HData PDUs.
type DataHdr struct {
	CCCID uint16 // command capsule CID, echoed verbatim
	TTAG  uint16 // H2C: the R2T's transfer tag; C2H: 0
	DataO uint32 // offset of this chunk in the command's data
	DataL uint32 // data bytes in this PDU
}

// ParseDataHdr decodes the header of an H2CData/C2HData PDU.
func ParseDataHdr(hdr []byte) DataHdr {
	_ = hdr[DataHdrLen-1]
	return DataHdr{CCCID: le.Uint16(hdr[8:]), TTAG: le.Uint16(hdr[10:]), DataO: le.Uint32(hdr[12:]), DataL: le.Uint32(hdr[16:])}
}

// AppendDataHdr appends the header (and header digest) of an H2CData or
// C2HData PDU of m.DataL data bytes that start right after it (no padding).
// flags may hold FlagLastPDU and FlagSuccess; the digest flags come from dg.
// The caller then appends or sends the data and, when dg.Data, its digest
// (AppendDigest).
func AppendDataHdr(b []byte, t Type, flags Flags, m DataHdr, dg Digests) []byte {
	var p [DataHdrLen]byte
	hd, dd := digestLens(dg, m.DataL > 0)
	flags &^= FlagHDGST | FlagDDGST
	flags |= digestFlags(hd, dd)
	Header{Type: t, Flags: flags, HLen: DataHdrLen, PDO: uint8(DataHdrLen + hd),
		PLen: uint32(DataHdrLen+hd+dd) + m.DataL}.Put(p[:])
	le.PutUint16(p[8:], m.CCCID)
	le.PutUint16(p[10:], m.TTAG)
	le.PutUint32(p[12:], m.DataO)
	le.PutUint32(p[16:], m.DataL)
	return appendHdr(b, p[:], hd)
}

// AppendData appends a whole H2CData/C2HData PDU carrying data; m.DataL is
// set to len(data).
func AppendData(b []byte, t Type, flags Flags, m DataHdr, data []byte, dg Digests) []byte {
	m.DataL = uint32(len(data))
	b = AppendDataHdr(b, t, flags, m, dg)
	b = append(b, data...)
	if dg.Data && len(data) > 0 {
		b = AppendDigest(b, data)
	}
	return b
}

// R2T is the Ready to Transfer PDU's type-specific header.
type R2T struct {
	CCCID uint16
	TTAG  uint16
	R2TO  uint32 // offset of the requested data
	R2TL  uint32 // length requested
}

// AppendR2T appends an R2T PDU (with header digest when dg.Header).
func AppendR2T(b []byte, m R2T, dg Digests) []byte {
	var p [R2THdrLen]byte
	hd, _ := digestLens(dg, false)
	Header{Type: TypeR2T, Flags: digestFlags(hd, 0), HLen: R2THdrLen, PLen: uint32(R2THdrLen + hd)}.Put(p[:])
	le.PutUint16(p[8:], m.CCCID)
	le.PutUint16(p[10:], m.TTAG)
	le.PutUint32(p[12:], m.R2TO)
	le.PutUint32(p[16:], m.R2TL)
	return appendHdr(b, p[:], hd)
}

// ParseR2T decodes an R2T header.
func ParseR2T(hdr []byte) R2T {
	_ = hdr[R2THdrLen-1]
	return R2T{CCCID: le.Uint16(hdr[8:]), TTAG: le.Uint16(hdr[10:]), R2TO: le.Uint32(hdr[12:]), R2TL: le.Uint32(hdr[16:])}
}

// AppendCapsuleCmdHdr appends a CapsuleCmd header (and header digest) for
// a command with dataLen bytes of in-capsule data that follow it without
// padding; the caller appends the data and, when dg.Data and dataLen > 0,
// its digest.
func AppendCapsuleCmdHdr(b []byte, sqe *SQE, dataLen int, dg Digests) []byte {
	var p [CapsuleCmdLen]byte
	hd, dd := digestLens(dg, dataLen > 0)
	h := Header{Type: TypeCapsuleCmd, Flags: digestFlags(hd, dd), HLen: CapsuleCmdLen,
		PLen: uint32(CapsuleCmdLen + hd + dataLen + dd)}
	if dataLen > 0 {
		h.PDO = uint8(CapsuleCmdLen + hd)
	}
	h.Put(p[:])
	sqe.Put(p[8:])
	return appendHdr(b, p[:], hd)
}

// AppendCapsuleCmd appends a whole CapsuleCmd PDU with in-capsule data.
func AppendCapsuleCmd(b []byte, sqe *SQE, data []byte, dg Digests) []byte {
	b = AppendCapsuleCmdHdr(b, sqe, len(data), dg)
	b = append(b, data...)
	if dg.Data && len(data) > 0 {
		b = AppendDigest(b, data)
	}
	return b
}

// ParseCapsuleCmd decodes the SQE of a CapsuleCmd header.
func ParseCapsuleCmd(hdr []byte) SQE {
	var s SQE
	s.Parse(hdr[8:CapsuleCmdLen])
	return s
}

// AppendCapsuleResp appends a CapsuleResp PDU carrying cqe.
func AppendCapsuleResp(b []byte, cqe *CQE, dg Digests) []byte {
	var p [CapsuleRespLen]byte
	hd, _ := digestLens(dg, false)
	Header{Type: TypeCapsuleResp, Flags: digestFlags(hd, 0), HLen: CapsuleRespLen, PLen: uint32(CapsuleRespLen + hd)}.Put(p[:])
	cqe.Put(p[8:])
	return appendHdr(b, p[:], hd)
}

// ParseCapsuleResp decodes the CQE of a CapsuleResp header.
func ParseCapsuleResp(hdr []byte) CQE {
	var c CQE
	c.Parse(hdr[8:CapsuleRespLen])
	return c
}

// AppendDigest appends the 4-byte little-endian CRC32C of data to b.
func AppendDigest(b, data []byte) []byte {
	return le.AppendUint32(b, crc32c(data))
}

func digestLens(dg Digests, data bool) (hd, dd int) {
	if dg.Header {
		hd = DigestLen
	}
	if dg.Data && data {
		dd = DigestLen
	}
	return hd, dd
}

func digestFlags(hd, dd int) Flags {
	var f Flags
	if hd != 0 {
		f |= FlagHDGST
	}
	if dd != 0 {
		f |= FlagDDGST
	}
	return f
}

func appendHdr(b, hdr []byte, hd int) []byte {
	b = append(b, hdr...)
	if hd != 0 {
		b = AppendDigest(b, hdr)
	}
	return b
}
