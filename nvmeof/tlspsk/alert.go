package tlspsk

import (
	"errors"
	"fmt"
)

// ErrTLS marks a TLS failure: a bad message or record, a refused key or
// identity, an alert from the peer.
var ErrTLS = errors.New("tls failed")

// Alert descriptions (RFC 8446 section 6).
const (
	alertCloseNotify          = 0
	alertUnexpectedMessage    = 10
	alertBadRecordMAC         = 20
	alertRecordOverflow       = 22
	alertHandshakeFailure     = 40
	alertIllegalParameter     = 47
	alertDecodeError          = 50
	alertDecryptError         = 51
	alertProtocolVersion      = 70
	alertInternalError        = 80
	alertMissingExtension     = 109
	alertUnsupportedExtension = 110
	alertUnknownPSKIdentity   = 115
)

var alertNames = map[uint8]string{
	alertCloseNotify: "close_notify", alertUnexpectedMessage: "unexpected_message",
	alertBadRecordMAC: "bad_record_mac", alertRecordOverflow: "record_overflow",
	alertHandshakeFailure: "handshake_failure", alertIllegalParameter: "illegal_parameter",
	alertDecodeError: "decode_error", alertDecryptError: "decrypt_error",
	alertProtocolVersion: "protocol_version", alertInternalError: "internal_error",
	alertMissingExtension: "missing_extension", alertUnsupportedExtension: "unsupported_extension",
	alertUnknownPSKIdentity: "unknown_psk_identity",
}

func alertName(d uint8) string {
	if n, ok := alertNames[d]; ok {
		return n
	}
	return fmt.Sprintf("alert %d", d)
}

// AlertError is a TLS failure: one this side found (and sent Alert for) or
// one the peer reported (Remote).
type AlertError struct {
	Alert  uint8
	Remote bool
	Msg    string
}

func (e *AlertError) Error() string {
	if e.Remote {
		return fmt.Sprintf("tls: peer sent alert %s%s", alertName(e.Alert), remoteHint(e.Alert))
	}
	return fmt.Sprintf("tls: %s (sent alert %s)", e.Msg, alertName(e.Alert))
}

// remoteHint says what an alert usually means for a PSK handshake.
func remoteHint(a uint8) string {
	switch a {
	case alertDecryptError, alertBadRecordMAC:
		return ": the peer holds a different key for this identity"
	case alertIllegalParameter:
		return ": the peer may hold a different key for this identity (OpenSSL answers a binder that does not verify so)"
	case alertUnknownPSKIdentity, alertHandshakeFailure:
		return ": the peer has no key for this identity (host or subsystem NQN) or no common cipher suite"
	}
	return ""
}

// Is makes every AlertError an ErrTLS.
func (e *AlertError) Is(target error) bool { return target == ErrTLS }

func alertf(a uint8, format string, args ...any) *AlertError {
	return &AlertError{Alert: a, Msg: fmt.Sprintf(format, args...)}
}
