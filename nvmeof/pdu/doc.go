// Package pdu is the pure NVMe/TCP codec shared by the nvstripe target and
// initiator: transport PDUs (ICReq/ICResp, CapsuleCmd/CapsuleResp,
// H2CData/C2HData, R2T, H2CTermReq/C2HTermReq) with header and data digests,
// and the NVMe structures they carry (64-byte SQE, 16-byte CQE, fabrics
// Connect and Property commands, Identify data, log pages, status codes).
//
// It parses []byte and io.Reader values only: no sockets, no files, no clock.
//
// # Wire format
//
// Every NVMe/TCP multi-byte field is little-endian. Every PDU starts with an
// 8-byte common header:
//
//	off 0 type | 1 flags | 2 hlen | 3 pdo | 4..7 plen
//
// hlen is the PDU header length without the header digest; pdo is where the
// data starts (0 when the PDU carries none); plen is the whole PDU length:
// header, header digest (4, when the HDGSTF flag is set), padding, data and
// data digest (4, when DDGSTF is set). Digests are CRC32C stored
// little-endian; the header digest covers the hlen header bytes, the data
// digest covers the data bytes of that PDU only.
//
// The fixed header lengths are: ICReq/ICResp 128, TermReq 24 (followed by up
// to 128 bytes of the offending header), CapsuleCmd 72 (8 + SQE), CapsuleResp
// 24 (8 + CQE), H2CData/C2HData 24, R2T 24.
//
// # Reading
//
// ReadHeader reads and validates one PDU header (and its digest); ReadData
// then reads the data part into a buffer of the caller's choosing, so read
// data can land directly in its final place. ReadPDU does both into one
// buffer. A malformed PDU yields a *FatalError that carries the fatal error
// status (FES) and information (FEI) a C2HTermReq/H2CTermReq should report;
// errors.Is(err, ErrProtocol) is true for it.
//
// # Concurrency
//
// Values and functions here hold no shared state; a value may be used by one
// goroutine at a time, distinct values concurrently.
package pdu
