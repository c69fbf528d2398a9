package pdu

// Admin command opcodes.
const (
	AdminGetLogPage  uint8 = 0x02
	AdminIdentify    uint8 = 0x06
	AdminAbort       uint8 = 0x08
	AdminSetFeatures uint8 = 0x09
	AdminGetFeatures uint8 = 0x0A
	AdminAsyncEvent  uint8 = 0x0C
	AdminKeepAlive   uint8 = 0x18
	OpFabrics        uint8 = 0x7F // admin and I/O queues
)

// NVM I/O command opcodes.
const (
	IOFlush       uint8 = 0x00
	IOWrite       uint8 = 0x01
	IORead        uint8 = 0x02
	IOWriteUncor  uint8 = 0x04
	IOCompare     uint8 = 0x05
	IOWriteZeroes uint8 = 0x08
	IODSM         uint8 = 0x09
)

// Fabrics command types (FCTYPE, SQE byte 4).
const (
	FabricsPropertySet uint8 = 0x00
	FabricsConnect     uint8 = 0x01
	FabricsPropertyGet uint8 = 0x04
	FabricsAuthSend    uint8 = 0x05
	FabricsAuthRecv    uint8 = 0x06
	FabricsDisconnect  uint8 = 0x08
)

// Identify CNS values (CDW10 bits 0-7).
const (
	CNSNamespace     uint8 = 0x00
	CNSController    uint8 = 0x01
	CNSActiveNSList  uint8 = 0x02
	CNSNSDescList    uint8 = 0x03
	CNSCSNamespace   uint8 = 0x05
	CNSCSController  uint8 = 0x06
	CNSIndependentNS uint8 = 0x08
	IdentifyDataLen        = 4096
)

// Log page identifiers (Get Log Page CDW10 bits 0-7).
const (
	LogError       uint8 = 0x01
	LogSMART       uint8 = 0x02
	LogFirmware    uint8 = 0x03
	LogChangedNS   uint8 = 0x04
	LogCmdEffects  uint8 = 0x05
	LogANA         uint8 = 0x0C
	LogDiscovery   uint8 = 0x70
	LogReservation uint8 = 0x80
)

// Feature identifiers (Set/Get Features CDW10 bits 0-7).
const (
	FeatArbitration  uint8 = 0x01
	FeatPowerMgmt    uint8 = 0x02
	FeatVWC          uint8 = 0x06
	FeatNumQueues    uint8 = 0x07
	FeatIRQCoalesce  uint8 = 0x08
	FeatAsyncEvent   uint8 = 0x0B
	FeatAPST         uint8 = 0x0C
	FeatTimestamp    uint8 = 0x0E
	FeatKeepAlive    uint8 = 0x0F
	FeatHostBehavior uint8 = 0x16
	FeatHostID       uint8 = 0x81
)

// Property offsets (Property Get/Set OFST).
const (
	PropCAP  uint32 = 0x00 // 8 bytes
	PropVS   uint32 = 0x08
	PropCC   uint32 = 0x14
	PropCSTS uint32 = 0x1C
	PropNSSR uint32 = 0x20
	PropCRTO uint32 = 0x68
)

// CAP fields.
const (
	CAPCSSNVM    uint64 = 1 << 37 // NVM command set
	CAPCSSIOCS   uint64 = 1 << 43 // I/O command sets (makes Linux use CC.CSS 6)
	CAPCSSNoIOCS uint64 = 1 << 44
)

// MakeCAP builds a CAP value: mqes is the 0's based max queue entries,
// to the ready timeout in 500 ms units, css the CSS bits (CAPCSS...).
func MakeCAP(mqes uint16, to uint8, css uint64) uint64 {
	return uint64(mqes) | uint64(to)<<24 | css
}

// CAPMQES returns the 0's based max queue entries of a CAP value.
func CAPMQES(capv uint64) uint16 { return uint16(capv) }

// CC fields.
const (
	CCEnable     uint32 = 1 << 0
	CCShnMask    uint32 = 3 << 14
	CCShnNormal  uint32 = 1 << 14
	CCShnAbrupt  uint32 = 2 << 14
	CCCSSMask    uint32 = 7 << 4
	CCMPSMask    uint32 = 0xF << 7
	CCAMSMask    uint32 = 7 << 11
	CCIOSQESMask uint32 = 0xF << 16
	CCIOCQESMask uint32 = 0xF << 20
)

// CCIOSQES and CCIOCQES extract the I/O queue entry sizes (log2).
func CCIOSQES(cc uint32) uint8 { return uint8(cc>>16) & 0xF }

// CCIOCQES extracts log2 of the I/O CQ entry size.
func CCIOCQES(cc uint32) uint8 { return uint8(cc>>20) & 0xF }

// CCCSS extracts the command set selected.
func CCCSS(cc uint32) uint8 { return uint8(cc>>4) & 0x7 }

// CCMPS extracts the memory page size (2^(12+MPS)).
func CCMPS(cc uint32) uint8 { return uint8(cc>>7) & 0xF }

// CCAMS extracts the arbitration mechanism.
func CCAMS(cc uint32) uint8 { return uint8(cc>>11) & 0x7 }

// HostCC is the CC value a Linux host writes: IOSQES 6, IOCQES 4, the given
// CSS, MPS 0, plus en.
func HostCC(css uint8, en bool) uint32 {
	cc := uint32(6)<<16 | uint32(4)<<20 | uint32(css&7)<<4
	if en {
		cc |= CCEnable
	}
	return cc
}

// CSTS fields.
const (
	CSTSReady        uint32 = 1 << 0
	CSTSFatal        uint32 = 1 << 1
	CSTSShstMask     uint32 = 3 << 2
	CSTSShstOccuring uint32 = 1 << 2
	CSTSShstComplete uint32 = 2 << 2
)

// MakeVersion builds a VS/VER value.
func MakeVersion(major, minor, tertiary uint8) uint32 {
	return uint32(major)<<16 | uint32(minor)<<8 | uint32(tertiary)
}

// Asynchronous event types (AER completion DW0 bits 0-2).
const (
	AETypeError  uint8 = 0
	AETypeSMART  uint8 = 1
	AETypeNotice uint8 = 2
	AETypeIOCS   uint8 = 6
	AETypeVendor uint8 = 7
)

// Notice event information (AER completion DW0 bits 8-15).
const (
	AENoticeNSChanged   uint8 = 0x00
	AENoticeFWActivate  uint8 = 0x01
	AENoticeANAChange   uint8 = 0x03
	AENoticeDiscChanged uint8 = 0xF0
)

// OAES / Async Event Configuration bits.
const (
	OAESNSAttr   uint32 = 1 << 8
	OAESFWAct    uint32 = 1 << 9
	OAESANA      uint32 = 1 << 11
	OAESDiscLogs uint32 = 1 << 31
)

// AEREvent is the content of an Asynchronous Event Request completion.
type AEREvent struct {
	Type    uint8 // AEType...
	Info    uint8 // AENotice... for notices
	LogPage uint8 // the log the host should read
}

// DW0 encodes the event as CQE DW0.
func (e AEREvent) DW0() uint32 {
	return uint32(e.Type&7) | uint32(e.Info)<<8 | uint32(e.LogPage)<<16
}

// ParseAEREvent decodes CQE DW0 of an AER completion.
func ParseAEREvent(dw0 uint32) AEREvent {
	return AEREvent{Type: uint8(dw0) & 7, Info: uint8(dw0 >> 8), LogPage: uint8(dw0 >> 16)}
}

// NumQueues encodes/decodes the Number of Queues feature (FID 0x07):
// 0's based NSQR in bits 0-15, NCQR in bits 16-31.
func NumQueues(nsq, ncq uint16) uint32 { return uint32(nsq-1) | uint32(ncq-1)<<16 }

// ParseNumQueues returns the (1's based) submission and completion queue
// counts of a Number of Queues value.
func ParseNumQueues(v uint32) (nsq, ncq uint32) {
	return v&0xFFFF + 1, v>>16 + 1
}
