package pdu

import (
	"bytes"
	"errors"
	"fmt"
)

// Well-known names.
const (
	DiscoveryNQN = "nqn.2014-08.org.nvmexpress.discovery"
	NQNMaxLen    = 223 // the spec's limit; the fields hold 256 bytes
	// ConnectDataLen is the size of the Connect command's data.
	ConnectDataLen = 1024
	// CNTLIDDynamic in an admin Connect asks for any controller.
	CNTLIDDynamic uint16 = 0xFFFF
)

// Connect CATTR bits.
const (
	CAttrDisableSQFlow uint8 = 1 << 2
)

// ConnectCmd holds the fields of a fabrics Connect SQE (FCTYPE 0x01).
type ConnectCmd struct {
	RecFmt uint16 // must be 0
	QID    uint16 // 0 admin, 1.. I/O queues
	SQSize uint16 // 0's based
	CAttr  uint8  // bit 2: disable SQ flow control
	KATO   uint32 // keep-alive timeout, milliseconds (admin queue)
}

// SQE builds the Connect SQE; the 1024-byte data travels in-capsule.
func (c ConnectCmd) SQE(cid uint16) SQE {
	return SQE{
		Opcode: OpFabrics, Flags: PSDTSGL, CID: cid, NSID: uint32(FabricsConnect),
		SGL:   SGL{Length: ConnectDataLen, ID: SGLInCapsule},
		CDW10: uint32(c.RecFmt) | uint32(c.QID)<<16,
		CDW11: uint32(c.SQSize) | uint32(c.CAttr)<<16,
		CDW12: c.KATO,
	}
}

// ParseConnectCmd extracts the Connect fields of a fabrics SQE.
func ParseConnectCmd(s *SQE) ConnectCmd {
	return ConnectCmd{
		RecFmt: uint16(s.CDW10), QID: uint16(s.CDW10 >> 16),
		SQSize: uint16(s.CDW11), CAttr: uint8(s.CDW11 >> 16), KATO: s.CDW12,
	}
}

// ConnectData is the 1024-byte Connect data.
//
//	0 HOSTID (16) | 16 CNTLID | 256 SUBNQN (256) | 512 HOSTNQN (256)
type ConnectData struct {
	HostID  [16]byte
	CNTLID  uint16
	SubNQN  string
	HostNQN string
}

// Connect data field offsets (for Invalid Parameter IPO with IATTR 1).
const (
	ConnectOffHostID  = 0
	ConnectOffCNTLID  = 16
	ConnectOffSubNQN  = 256
	ConnectOffHostNQN = 512
)

// Put encodes d into b[:1024]; NQNs longer than 255 bytes are cut.
func (d *ConnectData) Put(b []byte) {
	_ = b[ConnectDataLen-1]
	clear(b[:ConnectDataLen])
	copy(b[0:16], d.HostID[:])
	le.PutUint16(b[16:], d.CNTLID)
	copy(b[256:511], d.SubNQN)
	copy(b[512:767], d.HostNQN)
}

// Marshal returns the 1024-byte encoding of d.
func (d *ConnectData) Marshal() []byte {
	b := make([]byte, ConnectDataLen)
	d.Put(b)
	return b
}

// ParseConnectData decodes Connect data. The NQN fields must be
// NUL-terminated inside their 256 bytes and hold printable ASCII.
func ParseConnectData(b []byte) (ConnectData, error) {
	var d ConnectData
	if len(b) < ConnectDataLen {
		return d, fmt.Errorf("connect data: %d bytes, want %d: %w", len(b), ConnectDataLen, ErrInvalidData)
	}
	copy(d.HostID[:], b[:16])
	d.CNTLID = le.Uint16(b[16:])
	var err error
	if d.SubNQN, err = cString(b[256:512], "subnqn"); err != nil {
		return d, err
	}
	if d.HostNQN, err = cString(b[512:768], "hostnqn"); err != nil {
		return d, err
	}
	return d, nil
}

// ErrInvalidData is the class of malformed command data (Connect data, log
// pages, identify data).
var ErrInvalidData = errors.New("invalid nvme data")

func cString(b []byte, name string) (string, error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", fmt.Errorf("connect data: %s not NUL-terminated: %w", name, ErrInvalidData)
	}
	for _, c := range b[:i] {
		if c < 0x20 || c > 0x7E {
			return "", fmt.Errorf("connect data: %s has byte 0x%02x: %w", name, c, ErrInvalidData)
		}
	}
	return string(b[:i]), nil
}

// PropertyCmd holds a Property Get (FCTYPE 0x04) or Set (0x00).
type PropertyCmd struct {
	Size8  bool   // ATTRIB bit 0: 8-byte property
	Offset uint32 // OFST
	Value  uint64 // Set only
}

// GetSQE builds a Property Get SQE.
func (p PropertyCmd) GetSQE(cid uint16) SQE {
	return SQE{Opcode: OpFabrics, Flags: PSDTSGL, CID: cid, NSID: uint32(FabricsPropertyGet),
		SGL: SGL{ID: SGLTransport}, CDW10: b2u(p.Size8), CDW11: p.Offset}
}

// SetSQE builds a Property Set SQE.
func (p PropertyCmd) SetSQE(cid uint16) SQE {
	return SQE{Opcode: OpFabrics, Flags: PSDTSGL, CID: cid, NSID: uint32(FabricsPropertySet),
		SGL: SGL{ID: SGLTransport}, CDW10: b2u(p.Size8), CDW11: p.Offset,
		CDW12: uint32(p.Value), CDW13: uint32(p.Value >> 32)}
}

// ParsePropertyCmd extracts the fields of a Property Get/Set SQE.
func ParsePropertyCmd(s *SQE) PropertyCmd {
	return PropertyCmd{Size8: s.CDW10&1 != 0, Offset: s.CDW11, Value: uint64(s.CDW12) | uint64(s.CDW13)<<32}
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// In-band authentication (AUTH_SEND, AUTH_RECEIVE): the security protocol
// fields of CDW10 (SECP 0xE9 DH-HMAC-CHAP, SPSP0 and SPSP1 1) and, in
// Connect's response DW0, the bit saying authentication is required.
const (
	AuthCDW10      = 0x01<<8 | 0x01<<16 | 0xE9<<24
	ConnectAuthReq = 1 << 17
	AuthMaxMessage = 4096 // largest TL/AL a target takes; Linux asks AL 4096
)

// AuthSendSQE sends tl bytes of an authentication message in-capsule.
func AuthSendSQE(cid uint16, tl uint32) SQE {
	return SQE{Opcode: OpFabrics, Flags: PSDTSGL, CID: cid, NSID: uint32(FabricsAuthSend),
		SGL: SGL{Length: tl, ID: SGLInCapsule}, CDW10: AuthCDW10, CDW11: tl}
}

// AuthRecvSQE reads al bytes of an authentication message.
func AuthRecvSQE(cid uint16, al uint32) SQE {
	return SQE{Opcode: OpFabrics, Flags: PSDTSGL, CID: cid, NSID: uint32(FabricsAuthRecv),
		SGL: SGL{Length: al, ID: SGLTransport}, CDW10: AuthCDW10, CDW11: al}
}

// IdentifySQE builds an Identify SQE for cns and nsid reading 4096 bytes
// through C2HData.
func IdentifySQE(cid uint16, cns uint8, nsid uint32) SQE {
	return SQE{Opcode: AdminIdentify, Flags: PSDTSGL, CID: cid, NSID: nsid,
		SGL: SGL{Length: IdentifyDataLen, ID: SGLTransport}, CDW10: uint32(cns)}
}

// GetLogPageCmd holds the fields of a Get Log Page SQE.
type GetLogPageCmd struct {
	LID    uint8
	LSP    uint8 // bits 0-6
	RAE    bool
	NumD   uint32 // dword count (1's based here; encoded 0's based)
	LSI    uint16
	Offset uint64 // LPO, bytes, multiple of 4
}

// Len returns the transfer length in bytes.
func (g GetLogPageCmd) Len() int { return int(g.NumD) * 4 }

// SQE builds a Get Log Page SQE.
func (g GetLogPageCmd) SQE(cid uint16, nsid uint32) SQE {
	numd := g.NumD - 1
	cdw10 := uint32(g.LID) | uint32(g.LSP&0x7F)<<8 | (numd&0xFFFF)<<16
	if g.RAE {
		cdw10 |= 1 << 15
	}
	return SQE{Opcode: AdminGetLogPage, Flags: PSDTSGL, CID: cid, NSID: nsid,
		SGL:   SGL{Length: uint32(g.Len()), ID: SGLTransport},
		CDW10: cdw10, CDW11: numd>>16 | uint32(g.LSI)<<16,
		CDW12: uint32(g.Offset), CDW13: uint32(g.Offset >> 32)}
}

// ParseGetLogPageCmd extracts the fields of a Get Log Page SQE.
func ParseGetLogPageCmd(s *SQE) GetLogPageCmd {
	numd := (s.CDW10>>16 | (s.CDW11&0xFFFF)<<16) + 1
	return GetLogPageCmd{
		LID: uint8(s.CDW10), LSP: uint8(s.CDW10>>8) & 0x7F, RAE: s.CDW10&(1<<15) != 0,
		NumD: numd, LSI: uint16(s.CDW11 >> 16), Offset: uint64(s.CDW12) | uint64(s.CDW13)<<32,
	}
}

// FeaturesSQE builds a Set (set=true) or Get Features SQE for fid with
// value in CDW11.
func FeaturesSQE(cid uint16, set bool, fid uint8, value uint32) SQE {
	op := AdminGetFeatures
	if set {
		op = AdminSetFeatures
	}
	return SQE{Opcode: op, Flags: PSDTSGL, CID: cid, SGL: SGL{ID: SGLTransport},
		CDW10: uint32(fid), CDW11: value}
}

// DSMRange is one Dataset Management range (16 bytes).
type DSMRange struct {
	Attr uint32
	NLB  uint32 // length in LBAs, not 0's based
	SLBA uint64
}

// DSM attribute bits (CDW11).
const (
	DSMDeallocate uint32 = 1 << 2
	DSMRangeLen          = 16
	DSMMaxRanges         = 256
)

// AppendDSMRanges appends the encoding of rs to b.
func AppendDSMRanges(b []byte, rs []DSMRange) []byte {
	for _, r := range rs {
		b = le.AppendUint32(b, r.Attr)
		b = le.AppendUint32(b, r.NLB)
		b = le.AppendUint64(b, r.SLBA)
	}
	return b
}

// ParseDSMRanges decodes n ranges from b.
func ParseDSMRanges(b []byte, n int) ([]DSMRange, error) {
	if n < 1 || n > DSMMaxRanges || len(b) < n*DSMRangeLen {
		return nil, fmt.Errorf("dsm: %d ranges in %d bytes: %w", n, len(b), ErrInvalidData)
	}
	rs := make([]DSMRange, n)
	for i := range rs {
		p := b[i*DSMRangeLen:]
		rs[i] = DSMRange{Attr: le.Uint32(p), NLB: le.Uint32(p[4:]), SLBA: le.Uint64(p[8:])}
	}
	return rs, nil
}
