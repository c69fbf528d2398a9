package pdu

import "fmt"

// Reservation command opcodes (NVM command set).
const (
	IOResvRegister uint8 = 0x0D
	IOResvReport   uint8 = 0x0E
	IOResvAcquire  uint8 = 0x11
	IOResvRelease  uint8 = 0x15
)

// ONCSReservations in Identify Controller ONCS says the controller
// supports the reservation commands.
const ONCSReservations uint16 = 1 << 5

// RESCAP bits (Identify Namespace byte 31): bit 0 persist through power
// loss, bits 1-6 the reservation types 1-6, bit 7 IEKEY as defined since
// NVMe 1.3.
const (
	RESCAPPTPL    uint8 = 1 << 0
	RESCAPTypes   uint8 = 0x7E
	RESCAPIEKey13 uint8 = 1 << 7
)

// ResvType is a reservation type (RTYPE).
type ResvType uint8

// Reservation types.
const (
	ResvNone                     ResvType = 0
	ResvWriteExclusive           ResvType = 1
	ResvExclusiveAccess          ResvType = 2
	ResvWriteExclusiveRegOnly    ResvType = 3
	ResvExclusiveAccessRegOnly   ResvType = 4
	ResvWriteExclusiveAllRegs    ResvType = 5
	ResvExclusiveAccessAllRegs   ResvType = 6
	resvTypeMax                  ResvType = 6
	ResvRegisterActionRegister   uint8    = 0
	ResvRegisterActionUnregister uint8    = 1
	ResvRegisterActionReplace    uint8    = 2
	ResvAcquireActionAcquire     uint8    = 0
	ResvAcquireActionPreempt     uint8    = 1
	ResvAcquireActionPreemptAbrt uint8    = 2
	ResvReleaseActionRelease     uint8    = 0
	ResvReleaseActionClear       uint8    = 1
)

// Valid reports whether t is one of the six reservation types.
func (t ResvType) Valid() bool { return t >= ResvWriteExclusive && t <= resvTypeMax }

// AllRegistrants reports whether every registrant holds a reservation of
// type t.
func (t ResvType) AllRegistrants() bool {
	return t == ResvWriteExclusiveAllRegs || t == ResvExclusiveAccessAllRegs
}

// RegistrantsOnly reports whether registrants that are not the holder
// keep access under type t (types 3-6).
func (t ResvType) RegistrantsOnly() bool { return t >= ResvWriteExclusiveRegOnly && t <= resvTypeMax }

// ExclusiveAccess reports whether type t also blocks reads of hosts
// without access.
func (t ResvType) ExclusiveAccess() bool {
	return t == ResvExclusiveAccess || t == ResvExclusiveAccessRegOnly || t == ResvExclusiveAccessAllRegs
}

func (t ResvType) String() string {
	names := [...]string{"none", "write-exclusive", "exclusive-access", "write-exclusive-registrants-only",
		"exclusive-access-registrants-only", "write-exclusive-all-registrants", "exclusive-access-all-registrants"}
	if int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("rtype(%d)", uint8(t))
}

// ResvCmd is the CDW10 of Register, Acquire and Release: the action in
// bits 0-2, IEKEY in bit 3, RTYPE in bits 8-15 (Acquire, Release) and
// CPTPL in bits 30-31 (Register).
type ResvCmd struct {
	Action uint8
	IEKey  bool
	Type   ResvType
	CPTPL  uint8
}

// CDW10 encodes c.
func (c ResvCmd) CDW10() uint32 {
	v := uint32(c.Action&7) | uint32(c.Type)<<8 | uint32(c.CPTPL&3)<<30
	if c.IEKey {
		v |= 1 << 3
	}
	return v
}

// ParseResvCmd decodes a reservation command's CDW10.
func ParseResvCmd(cdw10 uint32) ResvCmd {
	return ResvCmd{Action: uint8(cdw10 & 7), IEKey: cdw10&(1<<3) != 0, Type: ResvType(cdw10 >> 8), CPTPL: uint8(cdw10 >> 30)}
}

// ResvKeysLen is the data length of Register and Acquire (two keys);
// Release carries one key (8 bytes), the Linux host sends 16.
const (
	ResvKeysLen = 16
	ResvKeyLen  = 8
)

// AppendResvKeys appends the 16-byte Register (CRKEY, NRKEY) or Acquire
// (CRKEY, PRKEY) data.
func AppendResvKeys(b []byte, first, second uint64) []byte {
	return le.AppendUint64(le.AppendUint64(b, first), second)
}

// ParseResvKeys decodes the current key and, when b holds 16 bytes, the
// second key. Fewer than 8 bytes is an error.
func ParseResvKeys(b []byte) (first, second uint64, err error) {
	if len(b) < ResvKeyLen {
		return 0, 0, fmt.Errorf("reservation data: %d bytes: %w", len(b), ErrInvalidData)
	}
	first = le.Uint64(b)
	if len(b) >= ResvKeysLen {
		second = le.Uint64(b[8:])
	}
	return first, second, nil
}

// Reservation Report with the extended data structure (CDW11 bit 0):
//
//	header (64): 0 GEN u32 | 4 RTYPE | 5 REGCTL u16 | 9 PTPLS | reserved
//	entry  (64): 0 CNTLID u16 | 2 RCSTS (bit 0 holder) | 8 RKEY u64 | 16 HOSTID (16) | reserved
const (
	ResvReportEDS       uint32 = 1 << 0
	ResvReportHeaderLen        = 64
	ResvReportEntryLen         = 64
)

// ResvStatus is a Reservation Report (extended data structure).
type ResvStatus struct {
	Gen         uint32
	Type        ResvType
	PTPL        bool
	Registrants []Registrant
	// Count is REGCTL: the number of registrants, which may exceed
	// len(Registrants) when the host asked for fewer bytes.
	Count int
}

// Registrant is one registered host in a Reservation Report.
type Registrant struct {
	CNTLID uint16
	Holder bool
	Key    uint64
	HostID [16]byte
}

// MarshalExt encodes s into exactly max(limit, 64) bytes (the host's
// NUMD), zero-padded, with REGCTL = len(s.Registrants) and the entries
// that fit.
func (s *ResvStatus) MarshalExt(limit int) []byte {
	b := make([]byte, max(ResvReportHeaderLen, limit))
	le.PutUint32(b, s.Gen)
	b[4] = byte(s.Type)
	le.PutUint16(b[5:], uint16(len(s.Registrants)))
	if s.PTPL {
		b[9] = 1
	}
	for i, r := range s.Registrants {
		off := ResvReportHeaderLen + i*ResvReportEntryLen
		if off+ResvReportEntryLen > len(b) {
			break
		}
		p := b[off:]
		le.PutUint16(p, r.CNTLID)
		if r.Holder {
			p[2] = 1
		}
		le.PutUint64(p[8:], r.Key)
		copy(p[16:32], r.HostID[:])
	}
	return b
}

// ParseResvStatusExt decodes an extended Reservation Report; entries that
// did not fit in b are left out (Count still says how many exist).
func ParseResvStatusExt(b []byte) (ResvStatus, error) {
	if len(b) < ResvReportHeaderLen {
		return ResvStatus{}, fmt.Errorf("reservation report: %d bytes: %w", len(b), ErrInvalidData)
	}
	s := ResvStatus{Gen: le.Uint32(b), Type: ResvType(b[4]), Count: int(le.Uint16(b[5:])), PTPL: b[9]&1 != 0}
	for i := 0; i < s.Count; i++ {
		off := ResvReportHeaderLen + i*ResvReportEntryLen
		if off+ResvReportEntryLen > len(b) {
			break
		}
		p := b[off:]
		r := Registrant{CNTLID: le.Uint16(p), Holder: p[2]&1 != 0, Key: le.Uint64(p[8:])}
		copy(r.HostID[:], p[16:32])
		s.Registrants = append(s.Registrants, r)
	}
	return s, nil
}
