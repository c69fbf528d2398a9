package pdu

import (
	"bytes"
	"fmt"
)

// IdentifyController is the Identify Controller data (CNS 01h, 4096 bytes),
// limited to the fields a fabrics controller fills. Offsets are in the
// comments; A.4.2 of the reference lists what the Linux host checks.
type IdentifyController struct {
	VID       uint16   // 0
	SSVID     uint16   // 2
	SN        string   // 4, 20 bytes ASCII space padded
	MN        string   // 24, 40 bytes
	FR        string   // 64, 8 bytes
	RAB       uint8    // 72
	IEEE      [3]byte  // 73
	CMIC      uint8    // 76: bit 0 multi-port, 1 multi-controller, 3 ANA
	MDTS      uint8    // 77: 2^MDTS * 4 KiB, 0 = no limit
	CNTLID    uint16   // 78
	VER       uint32   // 80
	OAES      uint32   // 92
	CTRATT    uint32   // 96
	CNTRLTYPE uint8    // 111: 1 I/O, 2 discovery, 3 admin
	FGUID     [16]byte // 112
	CRDT      [3]uint16
	OACS      uint16 // 256
	ACL       uint8  // 258
	AERL      uint8  // 259
	FRMW      uint8  // 260
	LPA       uint8  // 261
	ELPE      uint8  // 262
	NPSS      uint8  // 263
	KAS       uint16 // 320: 100 ms units
	ANATT     uint8  // 342
	ANACAP    uint8  // 343
	ANAGRPMAX uint32 // 344
	NANAGRPID uint32 // 348
	SQES      uint8  // 512
	CQES      uint8  // 513
	MAXCMD    uint16 // 514
	NN        uint32 // 516
	ONCS      uint16 // 520
	FUSES     uint16 // 522
	FNA       uint8  // 524
	VWC       uint8  // 525
	AWUN      uint16 // 526
	AWUPF     uint16 // 528
	SGLS      uint32 // 536
	MNAN      uint32 // 540
	SubNQN    string // 768, 256 bytes NUL padded
	IOCCSZ    uint32 // 1792: 16-byte units, SQE included
	IORCSZ    uint32 // 1796
	ICDOFF    uint16 // 1800
	FCATT     uint8  // 1802
	MSDBD     uint8  // 1803
	OFCS      uint16 // 1804
	DCTYPE    uint8  // 1806
}

// CMIC, CTRATT, ONCS, SGLS and ANACAP bits.
const (
	CMICMultiPort   uint8  = 1 << 0
	CMICMultiCtrl   uint8  = 1 << 1
	CMICANA         uint8  = 1 << 3
	CTRATTHostID128 uint32 = 1 << 0
	CTRATTTBKAS     uint32 = 1 << 6
	ONCSDSM         uint16 = 1 << 2
	ONCSWriteZeroes uint16 = 1 << 3
	SGLSSupported   uint32 = 1 << 0  // byte-aligned SGLs
	SGLSOffsetData  uint32 = 1 << 20 // offset addressing for in-capsule data
	CtrlTypeIO      uint8  = 1
	CtrlTypeDisc    uint8  = 2
)

// Marshal encodes the data into 4096 bytes.
func (c *IdentifyController) Marshal() []byte {
	b := make([]byte, IdentifyDataLen)
	c.Put(b)
	return b
}

// Put encodes the data into b[:4096], zeroing the rest.
func (c *IdentifyController) Put(b []byte) {
	_ = b[IdentifyDataLen-1]
	clear(b[:IdentifyDataLen])
	le.PutUint16(b[0:], c.VID)
	le.PutUint16(b[2:], c.SSVID)
	putPadded(b[4:24], c.SN, ' ')
	putPadded(b[24:64], c.MN, ' ')
	putPadded(b[64:72], c.FR, ' ')
	b[72] = c.RAB
	copy(b[73:76], c.IEEE[:])
	b[76], b[77] = c.CMIC, c.MDTS
	le.PutUint16(b[78:], c.CNTLID)
	le.PutUint32(b[80:], c.VER)
	le.PutUint32(b[92:], c.OAES)
	le.PutUint32(b[96:], c.CTRATT)
	b[111] = c.CNTRLTYPE
	copy(b[112:128], c.FGUID[:])
	for i, v := range c.CRDT {
		le.PutUint16(b[128+2*i:], v)
	}
	le.PutUint16(b[256:], c.OACS)
	b[258], b[259], b[260], b[261], b[262], b[263] = c.ACL, c.AERL, c.FRMW, c.LPA, c.ELPE, c.NPSS
	le.PutUint16(b[320:], c.KAS)
	b[342], b[343] = c.ANATT, c.ANACAP
	le.PutUint32(b[344:], c.ANAGRPMAX)
	le.PutUint32(b[348:], c.NANAGRPID)
	b[512], b[513] = c.SQES, c.CQES
	le.PutUint16(b[514:], c.MAXCMD)
	le.PutUint32(b[516:], c.NN)
	le.PutUint16(b[520:], c.ONCS)
	le.PutUint16(b[522:], c.FUSES)
	b[524], b[525] = c.FNA, c.VWC
	le.PutUint16(b[526:], c.AWUN)
	le.PutUint16(b[528:], c.AWUPF)
	le.PutUint32(b[536:], c.SGLS)
	le.PutUint32(b[540:], c.MNAN)
	putPadded(b[768:1023], c.SubNQN, 0)
	le.PutUint32(b[1792:], c.IOCCSZ)
	le.PutUint32(b[1796:], c.IORCSZ)
	le.PutUint16(b[1800:], c.ICDOFF)
	b[1802], b[1803] = c.FCATT, c.MSDBD
	le.PutUint16(b[1804:], c.OFCS)
	b[1806] = c.DCTYPE
}

// ParseIdentifyController decodes Identify Controller data.
func ParseIdentifyController(b []byte) (IdentifyController, error) {
	var c IdentifyController
	if len(b) < IdentifyDataLen {
		return c, fmt.Errorf("identify controller: %d bytes: %w", len(b), ErrInvalidData)
	}
	c.VID, c.SSVID = le.Uint16(b[0:]), le.Uint16(b[2:])
	c.SN, c.MN, c.FR = trimPadded(b[4:24]), trimPadded(b[24:64]), trimPadded(b[64:72])
	c.RAB = b[72]
	copy(c.IEEE[:], b[73:76])
	c.CMIC, c.MDTS, c.CNTLID = b[76], b[77], le.Uint16(b[78:])
	c.VER, c.OAES, c.CTRATT = le.Uint32(b[80:]), le.Uint32(b[92:]), le.Uint32(b[96:])
	c.CNTRLTYPE = b[111]
	copy(c.FGUID[:], b[112:128])
	for i := range c.CRDT {
		c.CRDT[i] = le.Uint16(b[128+2*i:])
	}
	c.OACS = le.Uint16(b[256:])
	c.ACL, c.AERL, c.FRMW, c.LPA, c.ELPE, c.NPSS = b[258], b[259], b[260], b[261], b[262], b[263]
	c.KAS, c.ANATT, c.ANACAP = le.Uint16(b[320:]), b[342], b[343]
	c.ANAGRPMAX, c.NANAGRPID = le.Uint32(b[344:]), le.Uint32(b[348:])
	c.SQES, c.CQES, c.MAXCMD, c.NN = b[512], b[513], le.Uint16(b[514:]), le.Uint32(b[516:])
	c.ONCS, c.FUSES, c.FNA, c.VWC = le.Uint16(b[520:]), le.Uint16(b[522:]), b[524], b[525]
	c.AWUN, c.AWUPF = le.Uint16(b[526:]), le.Uint16(b[528:])
	c.SGLS, c.MNAN = le.Uint32(b[536:]), le.Uint32(b[540:])
	c.SubNQN = trimPadded(b[768:1024])
	c.IOCCSZ, c.IORCSZ, c.ICDOFF = le.Uint32(b[1792:]), le.Uint32(b[1796:]), le.Uint16(b[1800:])
	c.FCATT, c.MSDBD, c.OFCS, c.DCTYPE = b[1802], b[1803], le.Uint16(b[1804:]), b[1806]
	return c, nil
}

// InCapsuleMax is the largest in-capsule data length the controller
// accepts on I/O queues: IOCCSZ*16 - 64.
func (c *IdentifyController) InCapsuleMax() int {
	if c.IOCCSZ < 4 {
		return 0
	}
	return int(c.IOCCSZ)*16 - SQELen
}

func putPadded(dst []byte, s string, pad byte) {
	n := copy(dst, s)
	for i := n; i < len(dst); i++ {
		dst[i] = pad
	}
}

func trimPadded(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(bytes.TrimRight(b, " "))
}

// LBAFormat is one LBA format descriptor of Identify Namespace.
type LBAFormat struct {
	MS    uint16 // metadata bytes per LBA
	LBADS uint8  // log2 of the LBA data size
	RP    uint8  // relative performance, bits 0-1
}

// IdentifyNamespace is the Identify Namespace data (CNS 00h, 4096 bytes),
// limited to the fields a soft target fills.
type IdentifyNamespace struct {
	NSZE     uint64 // 0, in LBAs
	NCAP     uint64 // 8; 0 means "not present"
	NUSE     uint64 // 16
	NSFEAT   uint8  // 24
	NLBAF    uint8  // 25, 0's based
	FLBAS    uint8  // 26
	MC       uint8  // 27
	DPC      uint8  // 28
	DPS      uint8  // 29
	NMIC     uint8  // 30: bit 0 shared
	RESCAP   uint8  // 31
	FPI      uint8  // 32
	DLFEAT   uint8  // 33
	NOIOB    uint16 // 46
	NPWG     uint16 // 64
	NPWA     uint16 // 66
	NPDG     uint16 // 68
	NPDA     uint16 // 70
	NOWS     uint16 // 72
	ANAGRPID uint32 // 92
	NSATTR   uint8  // 99: bit 0 write protected
	NGUID    [16]byte
	EUI64    [8]byte
	LBAF     []LBAFormat // 128, up to 64
}

// NMIC and DLFEAT bits.
const (
	NMICShared       uint8 = 1 << 0
	NSFEATThin       uint8 = 1 << 0
	NSFEATOptPerf    uint8 = 1 << 4
	DLFEATReadZeroes uint8 = 1 << 0 // bits 0-2 = 001b
	DLFEATWZDeac     uint8 = 1 << 3
)

// Marshal encodes the namespace data into 4096 bytes.
func (n *IdentifyNamespace) Marshal() []byte {
	b := make([]byte, IdentifyDataLen)
	le.PutUint64(b[0:], n.NSZE)
	le.PutUint64(b[8:], n.NCAP)
	le.PutUint64(b[16:], n.NUSE)
	b[24], b[25], b[26], b[27], b[28], b[29] = n.NSFEAT, n.NLBAF, n.FLBAS, n.MC, n.DPC, n.DPS
	b[30], b[31], b[32], b[33] = n.NMIC, n.RESCAP, n.FPI, n.DLFEAT
	le.PutUint16(b[46:], n.NOIOB)
	for i, v := range [5]uint16{n.NPWG, n.NPWA, n.NPDG, n.NPDA, n.NOWS} {
		le.PutUint16(b[64+2*i:], v)
	}
	le.PutUint32(b[92:], n.ANAGRPID)
	b[99] = n.NSATTR
	copy(b[104:120], n.NGUID[:])
	copy(b[120:128], n.EUI64[:])
	for i, f := range n.LBAF {
		if i == 64 {
			break
		}
		le.PutUint16(b[128+4*i:], f.MS)
		b[130+4*i], b[131+4*i] = f.LBADS, f.RP&3
	}
	return b
}

// ParseIdentifyNamespace decodes Identify Namespace data.
func ParseIdentifyNamespace(b []byte) (IdentifyNamespace, error) {
	var n IdentifyNamespace
	if len(b) < IdentifyDataLen {
		return n, fmt.Errorf("identify namespace: %d bytes: %w", len(b), ErrInvalidData)
	}
	n.NSZE, n.NCAP, n.NUSE = le.Uint64(b[0:]), le.Uint64(b[8:]), le.Uint64(b[16:])
	n.NSFEAT, n.NLBAF, n.FLBAS, n.MC, n.DPC, n.DPS = b[24], b[25], b[26], b[27], b[28], b[29]
	n.NMIC, n.RESCAP, n.FPI, n.DLFEAT = b[30], b[31], b[32], b[33]
	n.NOIOB = le.Uint16(b[46:])
	n.NPWG, n.NPWA, n.NPDG = le.Uint16(b[64:]), le.Uint16(b[66:]), le.Uint16(b[68:])
	n.NPDA, n.NOWS = le.Uint16(b[70:]), le.Uint16(b[72:])
	n.ANAGRPID, n.NSATTR = le.Uint32(b[92:]), b[99]
	copy(n.NGUID[:], b[104:120])
	copy(n.EUI64[:], b[120:128])
	n.LBAF = make([]LBAFormat, int(n.NLBAF)+1)
	for i := range n.LBAF {
		n.LBAF[i] = LBAFormat{MS: le.Uint16(b[128+4*i:]), LBADS: b[130+4*i], RP: b[131+4*i] & 3}
	}
	return n, nil
}

// BlockSize returns the LBA data size of the format FLBAS selects, or 0
// when it names no valid format.
func (n *IdentifyNamespace) BlockSize() int {
	i := int(n.FLBAS&0xF) | int(n.FLBAS>>5&3)<<4
	if i >= len(n.LBAF) || n.LBAF[i].LBADS < 9 || n.LBAF[i].LBADS > 16 {
		return 0
	}
	return 1 << n.LBAF[i].LBADS
}

// IndependentNamespace is the I/O command set independent Identify
// Namespace data (CNS 08h).
type IndependentNamespace struct {
	NSFEAT   uint8  // 0
	NMIC     uint8  // 1
	RESCAP   uint8  // 2
	FPI      uint8  // 3
	ANAGRPID uint32 // 4
	NSATTR   uint8  // 8
	NVMSETID uint16 // 10
	ENDGID   uint16 // 12
	NSTAT    uint8  // 14: bit 0 namespace ready
}

// Marshal encodes the data into 4096 bytes.
func (n *IndependentNamespace) Marshal() []byte {
	b := make([]byte, IdentifyDataLen)
	b[0], b[1], b[2], b[3] = n.NSFEAT, n.NMIC, n.RESCAP, n.FPI
	le.PutUint32(b[4:], n.ANAGRPID)
	b[8] = n.NSATTR
	le.PutUint16(b[10:], n.NVMSETID)
	le.PutUint16(b[12:], n.ENDGID)
	b[14] = n.NSTAT
	return b
}

// Namespace identification descriptor types (CNS 03h).
const (
	NIDTEUI64 uint8 = 0x01
	NIDTNGUID uint8 = 0x02
	NIDTUUID  uint8 = 0x03
	NIDTCSI   uint8 = 0x04
)

// NSDescriptor is one namespace identification descriptor.
type NSDescriptor struct {
	Type uint8
	ID   []byte // 8, 16, 16 or 1 bytes
}

// MarshalNSDescList encodes descriptors into a zero-filled 4096-byte list.
func MarshalNSDescList(ds []NSDescriptor) []byte {
	b := make([]byte, 0, IdentifyDataLen)
	for _, d := range ds {
		if len(b)+4+len(d.ID) > IdentifyDataLen-4 {
			break
		}
		b = append(b, d.Type, uint8(len(d.ID)), 0, 0)
		b = append(b, d.ID...)
	}
	return b[:IdentifyDataLen]
}

// ParseNSDescList decodes a descriptor list, stopping at NIDL 0.
func ParseNSDescList(b []byte) ([]NSDescriptor, error) {
	var ds []NSDescriptor
	for len(b) >= 4 && b[1] != 0 {
		n := int(b[1])
		if 4+n > len(b) {
			return ds, fmt.Errorf("ns descriptor of %d bytes overruns the list: %w", n, ErrInvalidData)
		}
		ds = append(ds, NSDescriptor{Type: b[0], ID: append([]byte(nil), b[4:4+n]...)})
		b = b[4+n:]
	}
	return ds, nil
}

// MarshalNSList encodes an active namespace ID list (CNS 02h) or a changed
// namespace list (log 04h): up to 1024 le32 IDs, zero-filled to 4096 bytes.
func MarshalNSList(ids []uint32) []byte {
	b := make([]byte, IdentifyDataLen)
	for i, id := range ids {
		if i == IdentifyDataLen/4 {
			break
		}
		le.PutUint32(b[4*i:], id)
	}
	return b
}

// ParseNSList decodes a namespace ID list up to its first zero entry.
func ParseNSList(b []byte) []uint32 {
	var ids []uint32
	for i := 0; i+4 <= len(b); i += 4 {
		id := le.Uint32(b[i:])
		if id == 0 {
			break
		}
		ids = append(ids, id)
	}
	return ids
}
