// Package proto is the pure codec of the NBD protocol (the fixed newstyle
// handshake and the transmission phase with simple and structured replies),
// shared by the nvstripe NBD server and the tests that play an NBD client.
//
// It builds and parses []byte values (and reads from an io.Reader in
// ReadOption); it opens no sockets or files and has no clock. Names and
// numbers follow the NBD protocol document (NetworkBlockDevice/nbd
// doc/proto.md); comments name its sections.
//
// # Wire format
//
// Every multi-byte field is big-endian.
//
// Handshake ("Fixed newstyle negotiation"): the server sends the 18-byte
// greeting
//
//	NBDMAGIC (8) | IHAVEOPT (8) | handshake flags (2)
//
// and the client answers with 4 bytes of client flags. Then the client sends
// options and the server answers each with one or more option replies:
//
//	option:       IHAVEOPT (8) | option (4) | data length (4) | data
//	option reply: 0x0003E889045565A9 (8) | option (4) | reply type (4) | length (4) | data
//
// NBD_OPT_EXPORT_NAME is answered without a reply header: size (8) |
// transmission flags (2) | 124 zero bytes unless NO_ZEROES was agreed.
//
// Transmission: requests are 28 bytes, followed by the payload for WRITE:
//
//	0x25609513 (4) | command flags (2) | type (2) | cookie (8) | offset (8) | length (4)
//
// Simple replies are 16 bytes, followed by the data of a successful READ:
//
//	0x67446698 (4) | error (4) | cookie (8)
//
// Structured reply chunks (after NBD_OPT_STRUCTURED_REPLY) are 20 bytes plus
// a payload whose layout depends on the chunk type:
//
//	0x668E33EF (4) | flags (2) | type (2) | cookie (8) | payload length (4)
//
// Extended headers (NBD_OPT_EXTENDED_HEADERS) are not implemented; the server
// answers that option with NBD_REP_ERR_UNSUP and clients fall back.
//
// # Concurrency
//
// The package holds no state. Its functions may be called from any number of
// goroutines; values are plain data.
package proto
