package proto

import "errors"

// Errors returned by the parsers; each is wrapped with the offending value.
var (
	// ErrBadMagic: a message does not start with the magic number it must.
	// A server drops the connection ("Terminating the transmission phase").
	ErrBadMagic = errors.New("nbd: bad magic")
	// ErrShort: the buffer is shorter than the message it should hold.
	ErrShort = errors.New("nbd: message too short")
	// ErrMalformed: lengths or counts inside a message do not add up, or a
	// string is too long or holds a NUL.
	ErrMalformed = errors.New("nbd: malformed message")
	// ErrTooLong: an option or reply is longer than the reader allows.
	ErrTooLong = errors.New("nbd: message too long")
	// ErrUnknownFlags: the client set a flag the server did not offer; the
	// server must close the connection ("Client flags").
	ErrUnknownFlags = errors.New("nbd: unknown client flags")
)
