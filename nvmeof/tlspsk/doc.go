// Package tlspsk is NVMe/TCP's TLS: TLS 1.3 with an external pre-shared
// key only (RFC 8446 with psk_dhe_ke over X25519, TLS_AES_128_GCM_SHA256
// or TLS_AES_256_GCM_SHA384, no certificates, no resumption, no early
// data), and the NVMe/TCP key handling around it: configured keys in the
// "NVMeTLSkey-1:hh:base64(key||crc32):" interchange form, the retained PSK
// derived with the host NQN, the identity "NVMe0R0h <hostnqn> <subnqn>"
// and the TLS PSK derived with it. Go's crypto/tls has no external PSK,
// hence this small implementation on crypto/ecdh, crypto/hkdf and
// AES-GCM. Client and Server run the handshake over a net.Conn and
// return a Conn that protects application data.
package tlspsk
