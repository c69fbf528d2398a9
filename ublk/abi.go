package ublk

import "encoding/binary"

// The ublk ABI (include/uapi/linux/ublk_cmd.h). Every structure is little
// endian and encoded by hand into byte slices, so that the layout is checked
// by tests against the sizes and offsets of the C structures.

// Control command numbers (UBLK_CMD_*): the legacy encoding is the bare
// number; kernels since 6.4 also take _IOWR/_IOR('u', nr, ctrlCmd).
const (
	cmdGetDevInfo = 0x02
	cmdAddDev     = 0x04
	cmdDelDev     = 0x05
	cmdStartDev   = 0x06
	cmdStopDev    = 0x07
	cmdSetParams  = 0x08
	cmdGetParams  = 0x09
	cmdStartRecov = 0x10 // START_USER_RECOVERY
	cmdEndRecov   = 0x11 // END_USER_RECOVERY
)

// cmdNames names the control commands in errors.
var cmdNames = map[uint32]string{cmdGetDevInfo: "GET_DEV_INFO", cmdAddDev: "ADD_DEV", cmdDelDev: "DEL_DEV",
	cmdStartDev: "START_DEV", cmdStopDev: "STOP_DEV", cmdSetParams: "SET_PARAMS", cmdGetParams: "GET_PARAMS",
	cmdStartRecov: "START_USER_RECOVERY", cmdEndRecov: "END_USER_RECOVERY"}

// IO command numbers (UBLK_IO_*), encoded like the control commands with
// struct ublksrv_io_cmd (16 bytes).
const (
	ioFetchReq       = 0x20
	ioCommitAndFetch = 0x21
)

// ioResAbort is the result of a FETCH/COMMIT_AND_FETCH command the driver
// ends because the device stops (UBLK_IO_RES_ABORT = -ENODEV).
const ioResAbort = -19

// Device flags (UBLK_F_*) this server knows.
const (
	flagCompInTask  = 1 << 1 // UBLK_F_URING_CMD_COMP_IN_TASK (set by a modular driver)
	flagRecovery    = 1 << 3 // UBLK_F_USER_RECOVERY
	flagReissue     = 1 << 4 // UBLK_F_USER_RECOVERY_REISSUE
	flagIoctlEncode = 1 << 6 // UBLK_F_CMD_IOCTL_ENCODE
)

// IO operations and flags in ublksrv_io_desc.op_flags.
const (
	opRead        = 0
	opWrite       = 1
	opFlush       = 2
	opDiscard     = 3
	opWriteZeroes = 5

	ioFlagFUA     = 1 << 13
	ioFlagNoUnmap = 1 << 15
)

// Parameter types and attributes (struct ublk_params).
const (
	paramTypeBasic   = 1 << 0
	paramTypeDiscard = 1 << 1

	attrReadOnly      = 1 << 0
	attrVolatileCache = 1 << 2
	attrFUA           = 1 << 3
)

// Device states (UBLK_S_DEV_*) in ublksrv_ctrl_dev_info.state.
const (
	StateDead     = 0
	StateLive     = 1
	StateQuiesced = 2
)

// Structure sizes.
const (
	ctrlCmdSize = 32 // struct ublksrv_ctrl_cmd
	devInfoSize = 64 // struct ublksrv_ctrl_dev_info
	ioCmdSize   = 16 // struct ublksrv_io_cmd
	ioDescSize  = 24 // struct ublksrv_io_desc
	paramsSize  = 64 // struct ublk_params with basic and discard
	maxDepth    = 4096
)

// Encoding says how command numbers are written: the 6.0-6.3 drivers take
// only the legacy numbers, later ones the ioctl-style numbers as well (and
// only those when built without CONFIG_BLKDEV_UBLK_LEGACY_OPCODES).
type Encoding int

const (
	EncodingIoctl Encoding = iota
	EncodingLegacy
)

func (e Encoding) String() string {
	if e == EncodingLegacy {
		return "legacy"
	}
	return "ioctl"
}

// ctrlOp returns the cmd_op of control command nr.
func (e Encoding) ctrlOp(nr uint32) uint32 {
	if e == EncodingLegacy {
		return nr
	}
	dir := uint32(3) // _IOC_READ|_IOC_WRITE
	if nr == cmdGetDevInfo || nr == cmdGetParams {
		dir = 2 // _IOR
	}
	return ioc(dir, nr, ctrlCmdSize)
}

// ioOp returns the cmd_op of IO command nr.
func (e Encoding) ioOp(nr uint32) uint32 {
	if e == EncodingLegacy {
		return nr
	}
	return ioc(3, nr, ioCmdSize)
}

func ioc(dir, nr, size uint32) uint32 { return dir<<30 | size<<16 | 'u'<<8 | nr }

// ctrlCmd is struct ublksrv_ctrl_cmd.
type ctrlCmd struct {
	DevID   uint32
	QueueID uint16
	Len     uint16
	Addr    uint64
	Data0   uint64
}

func (c ctrlCmd) encode() []byte {
	b := make([]byte, ctrlCmdSize)
	le.PutUint32(b[0:], c.DevID)
	le.PutUint16(b[4:], c.QueueID)
	le.PutUint16(b[6:], c.Len)
	le.PutUint64(b[8:], c.Addr)
	le.PutUint64(b[16:], c.Data0)
	return b
}

// DevInfo is struct ublksrv_ctrl_dev_info: what ADD_DEV asks for and the
// driver answers (it may lower queues and the IO size), and GET_DEV_INFO.
type DevInfo struct {
	Queues     uint16
	Depth      uint16
	State      uint16
	MaxIOBytes uint32
	ID         uint32
	ServerPID  int32
	Flags      uint64
}

func (d DevInfo) encode(b []byte) {
	clear(b[:devInfoSize])
	le.PutUint16(b[0:], d.Queues)
	le.PutUint16(b[2:], d.Depth)
	le.PutUint16(b[4:], d.State)
	le.PutUint32(b[8:], d.MaxIOBytes)
	le.PutUint32(b[12:], d.ID)
	le.PutUint32(b[16:], uint32(d.ServerPID))
	le.PutUint64(b[24:], d.Flags)
}

func decodeDevInfo(b []byte) DevInfo {
	return DevInfo{Queues: le.Uint16(b[0:]), Depth: le.Uint16(b[2:]), State: le.Uint16(b[4:]),
		MaxIOBytes: le.Uint32(b[8:]), ID: le.Uint32(b[12:]), ServerPID: int32(le.Uint32(b[16:])),
		Flags: le.Uint64(b[24:])}
}

// ioCmd is struct ublksrv_io_cmd.
func encodeIOCmd(b []byte, queue, tag uint16, result int32, addr uint64) {
	le.PutUint16(b[0:], queue)
	le.PutUint16(b[2:], tag)
	le.PutUint32(b[4:], uint32(result))
	le.PutUint64(b[8:], addr)
}

// request is a decoded struct ublksrv_io_desc.
type request struct {
	op      uint8
	flags   uint32 // op_flags with the op masked off
	sectors uint32
	start   uint64 // first 512-byte sector
}

func decodeDesc(b []byte) request {
	of := le.Uint32(b[0:])
	return request{op: uint8(of), flags: of &^ 0xff, sectors: le.Uint32(b[4:]), start: le.Uint64(b[8:])}
}

// params is struct ublk_params with its basic and discard parts.
type params struct {
	attrs                          uint32
	logicalShift, physicalShift    uint8
	ioOptShift, ioMinShift         uint8
	maxSectors                     uint32
	devSectors                     uint64
	discardGranularity, maxDiscard uint32
	maxWriteZeroes                 uint32
}

func (p params) encode() []byte {
	b := make([]byte, paramsSize)
	le.PutUint32(b[0:], paramsSize)
	le.PutUint32(b[4:], paramTypeBasic|paramTypeDiscard)
	le.PutUint32(b[8:], p.attrs)
	b[12], b[13], b[14], b[15] = p.logicalShift, p.physicalShift, p.ioOptShift, p.ioMinShift
	le.PutUint32(b[16:], p.maxSectors)
	// chunk_sectors at 20 and virt_boundary_mask at 32 stay 0.
	le.PutUint64(b[24:], p.devSectors)
	// discard part at 40: alignment 0, granularity, max sectors, max write-zeroes sectors, segments 1.
	le.PutUint32(b[44:], p.discardGranularity)
	le.PutUint32(b[48:], p.maxDiscard)
	le.PutUint32(b[52:], p.maxWriteZeroes)
	le.PutUint16(b[56:], 1)
	return b
}

// decodeParamsSize returns the device size in bytes and the logical block
// size of an encoded struct ublk_params (GET_PARAMS).
func decodeParamsSize(b []byte) (size int64, blockSize int) {
	return int64(le.Uint64(b[24:])) << 9, 1 << b[12]
}

var le = binary.LittleEndian
