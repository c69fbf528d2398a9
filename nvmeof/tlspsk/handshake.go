package tlspsk

import (
	"context"
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"slices"
	"time"
)

// ClientConfig is what a client needs: the PSK identity, the TLS PSK
// and its cipher suite (Key.PSK makes all three).
type ClientConfig struct {
	Identity string
	PSK      []byte
	Suite    *Suite
	// Rand is the randomness for the hello and the key share. Default
	// crypto/rand.Reader.
	Rand io.Reader
}

// ServerConfig is what a server needs: Lookup returns the TLS PSK and
// cipher suite of an identity, or an error that refuses the identity.
type ServerConfig struct {
	Lookup func(identity string) (psk []byte, s *Suite, err error)
	Rand   io.Reader
}

// Client runs the client side of a TLS 1.3 handshake with an external PSK
// (psk_dhe_ke, X25519) over raw, bounded by ctx. On error it has sent an
// alert when it could; the caller closes raw.
func Client(ctx context.Context, raw net.Conn, cfg ClientConfig) (*Conn, error) {
	return handshake(ctx, raw, func(c *Conn) error { return c.clientHandshake(cfg) })
}

// Server runs the server side of the handshake; see Client.
func Server(ctx context.Context, raw net.Conn, cfg ServerConfig) (*Conn, error) {
	return handshake(ctx, raw, func(c *Conn) error { return c.serverHandshake(cfg) })
}

// handshake runs one side's handshake on a new Conn over raw, bounded by
// ctx, and returns the Conn ready for records.
func handshake(ctx context.Context, raw net.Conn, side func(c *Conn) error) (*Conn, error) {
	c := newConn(raw)
	if err := c.bounded(ctx, func() error { return side(c) }); err != nil {
		return nil, err
	}
	c.grow()
	return c, nil
}

// bounded runs a handshake under ctx's deadline and cancellation and sends
// the alert of a failure this side found.
func (c *Conn) bounded(ctx context.Context, run func() error) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.raw.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.raw.SetDeadline(time.Now()) })
	err := run()
	if !stop() {
		err = fmt.Errorf("tls handshake: %w", context.Cause(ctx))
	}
	_ = c.raw.SetDeadline(time.Time{})
	var ae *AlertError
	if errors.As(err, &ae) && !ae.Remote {
		c.sendAlert(ae.Alert)
	}
	if err != nil && !errors.Is(err, ErrTLS) {
		err = fmt.Errorf("tls handshake: %w", noEOF(err))
	}
	return err
}

func randOr(r io.Reader) io.Reader {
	if r == nil {
		return rand.Reader
	}
	return r
}

// readHandshake returns the next handshake message, which must be of type
// want. Compatibility ChangeCipherSpec records are skipped.
func (c *Conn) readHandshake(want int) ([]byte, error) {
	for {
		msg, err := c.nextHandshakeMsg()
		if err != nil {
			return nil, err
		}
		if msg != nil {
			if int(msg[0]) != want {
				return nil, alertf(alertUnexpectedMessage, "handshake message %d, want %d", msg[0], want)
			}
			return msg, nil
		}
		typ, content, err := c.readRecord()
		if err != nil {
			return nil, err
		}
		switch {
		case typ == recordHandshake:
			c.hs = append(c.hs, content...)
		case typ == recordCCS && len(content) == 1 && content[0] == 1:
		default:
			return nil, alertf(alertUnexpectedMessage, "record type %d inside the handshake", typ)
		}
	}
}

// keyChange checks that no handshake message straddles a key change.
func (c *Conn) keyChange() error {
	if len(c.hs) > 0 {
		return alertf(alertUnexpectedMessage, "handshake message straddles a key change")
	}
	return nil
}

// schedule is the TLS 1.3 key schedule of one connection.
type schedule struct {
	s          *Suite
	early, hs  []byte
	transcript hash.Hash
	cHS, sHS   []byte
}

func newSchedule(s *Suite, psk []byte) *schedule {
	return &schedule{s: s, early: extract(s.hash, psk), transcript: s.hash()}
}

// binder is the PSK binder over a truncated ClientHello.
func (k *schedule) binder(truncated []byte) []byte {
	h := k.s.hash()
	h.Write(truncated)
	return k.s.finished(k.s.deriveSecret(k.early, "ext binder", nil), h.Sum(nil))
}

// handshakeSecrets follow the ServerHello (in the transcript).
func (k *schedule) handshakeSecrets(shared []byte) {
	k.hs = extractSalt(k.s.hash, k.s.deriveSecret(k.early, "derived", nil), shared)
	k.cHS = k.s.deriveSecret(k.hs, "c hs traffic", k.transcript)
	k.sHS = k.s.deriveSecret(k.hs, "s hs traffic", k.transcript)
}

// appSecrets follow the server's Finished (in the transcript).
func (k *schedule) appSecrets() (client, server []byte) {
	master := extractSalt(k.s.hash, k.s.deriveSecret(k.hs, "derived", nil), make([]byte, k.s.hashLen))
	return k.s.deriveSecret(master, "c ap traffic", k.transcript), k.s.deriveSecret(master, "s ap traffic", k.transcript)
}

func (k *schedule) finished(base []byte) []byte {
	return handshakeMsg(typeFinished, k.s.finished(base, k.transcript.Sum(nil)))
}

func (k *schedule) checkFinished(base, msg []byte, who string) error {
	if !hmac.Equal(msg[4:], k.s.finished(base, k.transcript.Sum(nil))) {
		return alertf(alertDecryptError, "%s Finished does not verify", who)
	}
	k.transcript.Write(msg)
	return nil
}

func (c *Conn) clientHandshake(cfg ClientConfig) error {
	s := cfg.Suite
	if s == nil || len(cfg.PSK) != s.hashLen || cfg.Identity == "" || len(cfg.Identity) > 1024 {
		return errors.New("tls: client needs an identity and a PSK of its suite's hash length")
	}
	c.suite, c.identity = s, cfg.Identity
	priv, err := ecdh.X25519().GenerateKey(randOr(cfg.Rand))
	if err != nil {
		return err
	}
	var random [32]byte
	if _, err := io.ReadFull(randOr(cfg.Rand), random[:]); err != nil {
		return err
	}
	k := newSchedule(s, cfg.PSK)
	hello, bindersAt := buildClientHello(random[:], s, priv.PublicKey().Bytes(), cfg.Identity)
	copy(hello[bindersAt+3:], k.binder(hello[:bindersAt]))
	k.transcript.Write(hello)
	if _, err := c.raw.Write(c.out.appendRecord(nil, recordHandshake, hello)); err != nil {
		return err
	}
	msg, err := c.readHandshake(typeServerHello)
	if err != nil {
		return err
	}
	shared, err := checkServerHello(msg, s, priv)
	if err != nil {
		return err
	}
	k.transcript.Write(msg)
	k.handshakeSecrets(shared)
	if err := c.keyChange(); err != nil {
		return err
	}
	c.in.setSecret(s, k.sHS)
	c.out.setSecret(s, k.cHS) // from here an alert goes out protected
	if msg, err = c.readHandshake(typeEncryptedExtensions); err != nil {
		return err
	}
	if aerr := checkEncryptedExtensions(msg); aerr != nil {
		return aerr
	}
	k.transcript.Write(msg)
	if msg, err = c.readHandshake(typeFinished); err != nil {
		return err
	}
	if err := k.checkFinished(k.sHS, msg, "server"); err != nil {
		return err
	}
	cAP, sAP := k.appSecrets()
	if err := c.keyChange(); err != nil {
		return err
	}
	if _, err := c.raw.Write(c.out.appendRecord(nil, recordHandshake, k.finished(k.cHS))); err != nil {
		return err
	}
	c.out.setSecret(s, cAP)
	c.in.setSecret(s, sAP)
	return nil
}

// buildClientHello makes a ClientHello offering one PSK identity with a
// zero binder; bindersAt is where the binders list starts (its length).
func buildClientHello(random []byte, s *Suite, share []byte, identity string) (msg []byte, bindersAt int) {
	w := &builder{}
	w.u16(0x0303)
	w.bytes(random)
	w.u8(0) // no legacy session id
	w.u16(2)
	w.u16(int(s.id))
	w.u8(1)
	w.u8(0)
	exts := w.open(2)
	w.extension(extSupportedVers, func() { w.u8(2); w.u16(versionTLS13) })
	w.extension(extSupportedGroups, func() { w.u16(2); w.u16(groupX25519) })
	w.extension(extSigAlgs, func() { w.u16(4); w.u16(0x0403); w.u16(0x0804) })
	w.extension(extKeyShare, func() {
		v := w.open(2)
		w.u16(groupX25519)
		w.u16(len(share))
		w.bytes(share)
		w.close(v, 2)
	})
	w.extension(extPSKModes, func() { w.u8(1); w.u8(pskDHEKE) })
	w.extension(extPreSharedKey, func() {
		ids := w.open(2)
		w.u16(len(identity))
		w.bytes([]byte(identity))
		w.b = append(w.b, 0, 0, 0, 0) // obfuscated_ticket_age
		w.close(ids, 2)
		bindersAt = len(w.b)
		w.u16(1 + s.hashLen)
		w.u8(s.hashLen)
		w.b = append(w.b, make([]byte, s.hashLen)...)
	})
	w.close(exts, 2)
	return handshakeMsg(typeClientHello, w.b), bindersAt + 4
}

// checkServerHello checks the ServerHello answers the ClientHello (TLS
// 1.3, our suite, our PSK, an X25519 share) and returns the shared secret.
func checkServerHello(msg []byte, s *Suite, priv *ecdh.PrivateKey) ([]byte, error) {
	sh, aerr := parseServerHello(msg)
	switch {
	case aerr != nil:
		return nil, aerr
	case [32]byte(sh.random) == helloRetryRandom:
		return nil, alertf(alertIllegalParameter, "server asked to retry the hello (it wants another key share group or suite)")
	case !sh.tls13:
		return nil, alertf(alertProtocolVersion, "server does not speak TLS 1.3")
	case len(sh.sessionID) != 0:
		return nil, alertf(alertIllegalParameter, "server echoed a session id that was not sent")
	case sh.suite != s.id:
		return nil, alertf(alertIllegalParameter, "server chose cipher suite %#04x, not the offered %s", sh.suite, s)
	case sh.pskIndex < 0:
		return nil, alertf(alertHandshakeFailure, "server did not accept the PSK (it wants another kind of TLS)")
	case sh.pskIndex != 0:
		return nil, alertf(alertIllegalParameter, "server chose PSK %d of 1", sh.pskIndex)
	case sh.x25519 == nil:
		return nil, alertf(alertMissingExtension, "server sent no key share (psk_dhe_ke was the only mode offered)")
	}
	peer, err := ecdh.X25519().NewPublicKey(sh.x25519)
	if err != nil {
		return nil, alertf(alertIllegalParameter, "server key share: %v", err)
	}
	shared, err := priv.ECDH(peer)
	if err != nil {
		return nil, alertf(alertIllegalParameter, "server key share: %v", err)
	}
	return shared, nil
}

func (c *Conn) serverHandshake(cfg ServerConfig) error {
	msg, err := c.readHandshake(typeClientHello)
	if err != nil {
		return err
	}
	ch, aerr := parseClientHello(msg)
	if aerr != nil {
		return aerr
	}
	i, psk, s, err := checkClientHello(ch, msg, cfg)
	if err != nil {
		return err
	}
	c.suite, c.identity = s, ch.identities[i]
	priv, err := ecdh.X25519().GenerateKey(randOr(cfg.Rand))
	if err != nil {
		return err
	}
	peer, err := ecdh.X25519().NewPublicKey(ch.x25519)
	if err != nil {
		return alertf(alertIllegalParameter, "client key share: %v", err)
	}
	shared, err := priv.ECDH(peer)
	if err != nil {
		return alertf(alertIllegalParameter, "client key share: %v", err)
	}
	var random [32]byte
	if _, err := io.ReadFull(randOr(cfg.Rand), random[:]); err != nil {
		return err
	}
	k := newSchedule(s, psk)
	k.transcript.Write(msg)
	sh := buildServerHello(random[:], ch.sessionID, s, priv.PublicKey().Bytes(), i)
	k.transcript.Write(sh)
	k.handshakeSecrets(shared)
	out := c.out.appendRecord(nil, recordHandshake, sh)
	if len(ch.sessionID) > 0 { // middlebox compatibility mode
		out = append(out, recordCCS, 3, 3, 0, 1, 1)
	}
	c.out.setSecret(s, k.sHS)
	ee := handshakeMsg(typeEncryptedExtensions, []byte{0, 0})
	k.transcript.Write(ee)
	fin := k.finished(k.sHS)
	k.transcript.Write(fin)
	out = c.out.appendRecord(out, recordHandshake, append(ee, fin...))
	if _, err := c.raw.Write(out); err != nil {
		return err
	}
	cAP, sAP := k.appSecrets()
	if err := c.keyChange(); err != nil {
		return err
	}
	c.in.setSecret(s, k.cHS)
	if msg, err = c.readHandshake(typeFinished); err != nil {
		return err
	}
	if err := k.checkFinished(k.cHS, msg, "client"); err != nil {
		return err
	}
	if err := c.keyChange(); err != nil {
		return err
	}
	c.in.setSecret(s, cAP)
	c.out.setSecret(s, sAP)
	return nil
}

// checkClientHello picks the first identity cfg knows, checks its binder
// and what psk_dhe_ke needs, and returns the identity's index, TLS PSK and
// suite.
func checkClientHello(ch *clientHello, msg []byte, cfg ServerConfig) (int, []byte, *Suite, error) {
	switch {
	case !ch.tls13:
		return 0, nil, nil, alertf(alertProtocolVersion, "client does not offer TLS 1.3")
	case len(ch.identities) == 0:
		return 0, nil, nil, alertf(alertMissingExtension, "client offers no PSK (this side takes only TLS with a pre-shared key)")
	case !ch.dheMode:
		return 0, nil, nil, alertf(alertHandshakeFailure, "client does not offer psk_dhe_ke")
	case ch.earlyData:
		return 0, nil, nil, alertf(alertIllegalParameter, "client offers early data, which this side does not take")
	case ch.x25519 == nil:
		return 0, nil, nil, alertf(alertHandshakeFailure, "client sent no X25519 key share")
	}
	var lookupErr error
	for i, id := range ch.identities {
		psk, s, err := cfg.Lookup(id)
		if err != nil {
			lookupErr = err
			continue
		}
		if !slices.Contains(ch.suites, s.id) {
			return 0, nil, nil, alertf(alertHandshakeFailure, "client does not offer %s for identity %q", s, id)
		}
		if !hmac.Equal(ch.binders[i], newSchedule(s, psk).binder(msg[:ch.bindersAt])) {
			return 0, nil, nil, alertf(alertDecryptError, "PSK binder of identity %q does not verify: the client holds a different key", id)
		}
		return i, psk, s, nil
	}
	return 0, nil, nil, alertf(alertUnknownPSKIdentity, "no key for PSK identity %q: %v", ch.identities[0], lookupErr)
}

func buildServerHello(random, sessionID []byte, s *Suite, share []byte, pskIndex int) []byte {
	w := &builder{}
	w.u16(0x0303)
	w.bytes(random)
	w.u8(len(sessionID))
	w.bytes(sessionID)
	w.u16(int(s.id))
	w.u8(0)
	exts := w.open(2)
	w.extension(extSupportedVers, func() { w.u16(versionTLS13) })
	w.extension(extKeyShare, func() { w.u16(groupX25519); w.u16(len(share)); w.bytes(share) })
	w.extension(extPreSharedKey, func() { w.u16(pskIndex) })
	w.close(exts, 2)
	return handshakeMsg(typeServerHello, w.b)
}

// Sniff reads the first byte from raw and says whether it opens a TLS
// handshake record (an NVMe/TCP ICReq opens with 0); the returned
// connection replays that byte.
func Sniff(raw net.Conn) (bool, net.Conn, error) {
	var b [1]byte
	if _, err := io.ReadFull(raw, b[:]); err != nil {
		return false, nil, err
	}
	return b[0] == recordHandshake, &replayConn{Conn: raw, pre: b[:]}, nil
}

type replayConn struct {
	net.Conn
	pre []byte
}

func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.pre) > 0 && len(p) > 0 {
		n := copy(p, r.pre)
		r.pre = r.pre[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}
