package pdu

import (
	"fmt"
	"strings"
)

// ANAState is an Asymmetric Namespace Access state.
type ANAState uint8

// ANA states (A.5.1).
const (
	ANAOptimized      ANAState = 0x01
	ANANonOptimized   ANAState = 0x02
	ANAInaccessible   ANAState = 0x03
	ANAPersistentLoss ANAState = 0x04
	ANAChange         ANAState = 0x0F
)

// String returns the nvmet configfs name of the state.
func (s ANAState) String() string {
	switch s {
	case ANAOptimized:
		return "optimized"
	case ANANonOptimized:
		return "non-optimized"
	case ANAInaccessible:
		return "inaccessible"
	case ANAPersistentLoss:
		return "persistent-loss"
	case ANAChange:
		return "change"
	}
	return fmt.Sprintf("ana-state(0x%02x)", uint8(s))
}

// Valid reports whether s is one of the five defined states.
func (s ANAState) Valid() bool {
	switch s {
	case ANAOptimized, ANANonOptimized, ANAInaccessible, ANAPersistentLoss, ANAChange:
		return true
	}
	return false
}

// Usable reports whether I/O may be sent on a path in state s.
func (s ANAState) Usable() bool { return s == ANAOptimized || s == ANANonOptimized }

// IOStatus is the status a controller returns for namespace I/O in state s
// (SCSuccess for the usable states).
func (s ANAState) IOStatus() StatusCode {
	switch s {
	case ANAInaccessible:
		return SCANAInaccessible
	case ANAPersistentLoss:
		return SCANAPersistentLoss
	case ANAChange:
		return SCANATransition
	}
	return SCSuccess
}

// ParseANAState parses an nvmet state name (optimized, non-optimized,
// inaccessible, persistent-loss, change).
func ParseANAState(s string) (ANAState, error) {
	for _, st := range []ANAState{ANAOptimized, ANANonOptimized, ANAInaccessible, ANAPersistentLoss, ANAChange} {
		if strings.EqualFold(s, st.String()) {
			return st, nil
		}
	}
	return 0, fmt.Errorf("unknown ana state %q (want optimized, non-optimized, inaccessible, persistent-loss or change)", s)
}

// ANAGroupDesc is one group descriptor of the ANA log page.
type ANAGroupDesc struct {
	GroupID     uint32
	ChangeCount uint64
	State       ANAState
	NSIDs       []uint32 // ascending
}

// ANALog is the ANA log page (LID 0x0C).
//
//	header: 0 CHGCNT (8) | 8 NGRPS (2) | 10 reserved (6)
//	group:  0 ANAGRPID | 4 NNSIDS | 8 CHGCNT (8) | 16 state | 17 reserved (15) | 32 NSIDs (4 each)
type ANALog struct {
	ChangeCount uint64
	Groups      []ANAGroupDesc
}

// ANA log constants.
const (
	ANALogHdrLen   = 16
	ANAGroupHdrLen = 32
	ANALSPRGO      = 1 // LSP bit 0: return groups only
)

// Append encodes the log to b. With groupsOnly (LSP RGO) the NSID lists
// are left out and NNSIDS is 0.
func (l *ANALog) Append(b []byte, groupsOnly bool) []byte {
	b = le.AppendUint64(b, l.ChangeCount)
	b = le.AppendUint16(b, uint16(len(l.Groups)))
	b = append(b, make([]byte, 6)...)
	for _, g := range l.Groups {
		n := uint32(len(g.NSIDs))
		if groupsOnly {
			n = 0
		}
		b = le.AppendUint32(b, g.GroupID)
		b = le.AppendUint32(b, n)
		b = le.AppendUint64(b, g.ChangeCount)
		b = append(b, byte(g.State))
		b = append(b, make([]byte, 15)...)
		for _, id := range g.NSIDs[:n] {
			b = le.AppendUint32(b, id)
		}
	}
	return b
}

// ParseANALog decodes an ANA log page, checking what the Linux host checks:
// group IDs nonzero and at most maxGroupID (0: no limit), valid states, and
// NSID lists that fit in b.
func ParseANALog(b []byte, maxGroupID uint32) (ANALog, error) {
	var l ANALog
	if len(b) < ANALogHdrLen {
		return l, fmt.Errorf("ana log: %d bytes: %w", len(b), ErrInvalidData)
	}
	l.ChangeCount = le.Uint64(b)
	n := int(le.Uint16(b[8:]))
	p := b[ANALogHdrLen:]
	for i := 0; i < n; i++ {
		if len(p) < ANAGroupHdrLen {
			return l, fmt.Errorf("ana log: group %d overruns the buffer: %w", i, ErrInvalidData)
		}
		g := ANAGroupDesc{GroupID: le.Uint32(p), ChangeCount: le.Uint64(p[8:]), State: ANAState(p[16] & 0xF)}
		nn := uint64(le.Uint32(p[4:]))
		if g.GroupID == 0 || (maxGroupID != 0 && g.GroupID > maxGroupID) {
			return l, fmt.Errorf("ana log: group id %d: %w", g.GroupID, ErrInvalidData)
		}
		if !g.State.Valid() {
			return l, fmt.Errorf("ana log: group %d state 0x%x: %w", g.GroupID, uint8(g.State), ErrInvalidData)
		}
		p = p[ANAGroupHdrLen:]
		if nn*4 > uint64(len(p)) {
			return l, fmt.Errorf("ana log: group %d lists %d nsids past the buffer: %w", g.GroupID, nn, ErrInvalidData)
		}
		for j := 0; j < int(nn); j++ {
			g.NSIDs = append(g.NSIDs, le.Uint32(p[4*j:]))
		}
		p = p[4*nn:]
		l.Groups = append(l.Groups, g)
	}
	return l, nil
}

// Discovery log page constants (LID 0x70).
const (
	DiscLogHdrLen   = 1024
	DiscEntryLen    = 1024
	TrTypeTCP       = 3
	AdrFamIPv4      = 1
	AdrFamIPv6      = 2
	SubTypeReferral = 1
	SubTypeNVMe     = 2
	SubTypeCurDisc  = 3
	// TReqNotRequired: secure channel not required (bits 0-1 = 2).
	TReqNotRequired uint8 = 2
	// TReqRequired: secure channel required (bits 0-1 = 1).
	TReqRequired uint8 = 1
	// SecTypeTLS13: TSAS security type (byte 0 for TCP) of a port that
	// takes TLS 1.3.
	SecTypeTLS13 uint8 = 2
	// TReqDisableSQFlow: the port supports disabling SQ flow control.
	TReqDisableSQFlow uint8 = 1 << 2
	// EFlagsDuplicate / EFlagsExplicitPersist / EFlagsNoCDC: entry flags.
	EFlagsDuplicate       uint16 = 1 << 0
	EFlagsExplicitPersist uint16 = 1 << 1
	EFlagsNoCDC           uint16 = 1 << 2
)

// DiscoveryEntry is one 1024-byte discovery log entry.
//
//	0 TRTYPE | 1 ADRFAM | 2 SUBTYPE | 3 TREQ | 4 PORTID | 6 CNTLID | 8 ASQSZ |
//	10 EFLAGS | 32 TRSVCID (32) | 256 SUBNQN (256) | 512 TRADDR (256) | 768 TSAS (256)
type DiscoveryEntry struct {
	TrType  uint8
	AdrFam  uint8
	SubType uint8
	TReq    uint8
	PortID  uint16
	CNTLID  uint16
	ASQSZ   uint16
	EFlags  uint16
	TrSvcID string
	SubNQN  string
	TrAddr  string
	SecType uint8 // TSAS byte 0 for TCP: 0 none
}

// Put encodes e into b[:1024].
func (e *DiscoveryEntry) Put(b []byte) {
	_ = b[DiscEntryLen-1]
	clear(b[:DiscEntryLen])
	b[0], b[1], b[2], b[3] = e.TrType, e.AdrFam, e.SubType, e.TReq
	le.PutUint16(b[4:], e.PortID)
	le.PutUint16(b[6:], e.CNTLID)
	le.PutUint16(b[8:], e.ASQSZ)
	le.PutUint16(b[10:], e.EFlags)
	putPadded(b[32:63], e.TrSvcID, 0)
	putPadded(b[256:511], e.SubNQN, 0)
	putPadded(b[512:767], e.TrAddr, 0)
	b[768] = e.SecType
}

// ParseDiscoveryEntry decodes a 1024-byte entry.
func ParseDiscoveryEntry(b []byte) (DiscoveryEntry, error) {
	if len(b) < DiscEntryLen {
		return DiscoveryEntry{}, fmt.Errorf("discovery entry: %d bytes: %w", len(b), ErrInvalidData)
	}
	return DiscoveryEntry{
		TrType: b[0], AdrFam: b[1], SubType: b[2], TReq: b[3],
		PortID: le.Uint16(b[4:]), CNTLID: le.Uint16(b[6:]), ASQSZ: le.Uint16(b[8:]), EFlags: le.Uint16(b[10:]),
		TrSvcID: trimPadded(b[32:64]), SubNQN: trimPadded(b[256:512]), TrAddr: trimPadded(b[512:768]),
		SecType: b[768],
	}, nil
}

// DiscoveryLog is the whole discovery log page.
type DiscoveryLog struct {
	GenCtr  uint64
	Entries []DiscoveryEntry
}

// Marshal encodes the log: the 1024-byte header then the entries.
func (l *DiscoveryLog) Marshal() []byte {
	b := make([]byte, DiscLogHdrLen+DiscEntryLen*len(l.Entries))
	le.PutUint64(b[0:], l.GenCtr)
	le.PutUint64(b[8:], uint64(len(l.Entries)))
	for i := range l.Entries {
		l.Entries[i].Put(b[DiscLogHdrLen+i*DiscEntryLen:])
	}
	return b
}

// ParseDiscoveryLog decodes a discovery log page; b must hold the header
// and every entry NUMREC announces.
func ParseDiscoveryLog(b []byte) (DiscoveryLog, error) {
	var l DiscoveryLog
	if len(b) < DiscLogHdrLen {
		return l, fmt.Errorf("discovery log: %d bytes: %w", len(b), ErrInvalidData)
	}
	l.GenCtr = le.Uint64(b)
	n := le.Uint64(b[8:])
	if n > uint64(len(b)-DiscLogHdrLen)/DiscEntryLen {
		return l, fmt.Errorf("discovery log: %d records in %d bytes: %w", n, len(b), ErrInvalidData)
	}
	for i := 0; i < int(n); i++ {
		e, err := ParseDiscoveryEntry(b[DiscLogHdrLen+i*DiscEntryLen:])
		if err != nil {
			return l, err
		}
		l.Entries = append(l.Entries, e)
	}
	return l, nil
}

// DiscoveryNumRec reads NUMREC from a discovery log header.
func DiscoveryNumRec(hdr []byte) uint64 {
	if len(hdr) < 16 {
		return 0
	}
	return le.Uint64(hdr[8:])
}
