package tlspsk

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Conn is a TLS 1.3 connection over a net.Conn after a completed
// handshake (Client or Server). Read and Write may run concurrently.
type Conn struct {
	raw      net.Conn
	suite    *Suite
	identity string

	rmu   sync.Mutex
	br    *bufio.Reader
	in    halfConn
	rbuf  []byte
	plain []byte // decrypted application data not yet read
	rerr  error
	hs    []byte // handshake bytes not yet a whole message

	wmu        sync.Mutex
	out        halfConn
	wbuf       []byte
	werr       error
	rekeyAfter uint64 // records sent with one key before a KeyUpdate
}

// newConn starts with small buffers: a peer that has not completed the
// handshake (holds no key) gets little memory. grow follows the handshake.
func newConn(raw net.Conn) *Conn {
	return &Conn{raw: raw, br: bufio.NewReaderSize(raw, 2<<10), rekeyAfter: recordsPerKey,
		rbuf: make([]byte, recordHeaderLen, 2<<10)}
}

// grow gives an established connection its full read buffer, keeping
// what the small one holds (the peer's first application data may have
// come with its Finished).
func (c *Conn) grow() {
	var r io.Reader = c.raw
	if n := c.br.Buffered(); n > 0 {
		pending, _ := c.br.Peek(n)
		r = io.MultiReader(bytes.NewReader(bytes.Clone(pending)), c.raw)
	}
	c.br = bufio.NewReaderSize(r, 64<<10)
}

// Identity is the PSK identity the handshake used.
func (c *Conn) Identity() string { return c.identity }

// Suite is the negotiated cipher suite.
func (c *Conn) Suite() *Suite { return c.suite }

// Read reads application data. It returns io.EOF after the peer's
// close_notify, and an *AlertError for a record that does not verify.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.plain) == 0 {
		if c.rerr != nil {
			return 0, c.rerr
		}
		if len(p) == 0 {
			return 0, nil
		}
		if err := c.readAppRecord(); err != nil {
			c.rerr = err
			var ae *AlertError
			if errors.As(err, &ae) && !ae.Remote {
				c.sendAlert(ae.Alert)
			}
		}
	}
	n := copy(p, c.plain)
	c.plain = c.plain[n:]
	return n, nil
}

// readAppRecord reads the next record after the handshake and handles
// what is not application data.
func (c *Conn) readAppRecord() error {
	typ, content, err := c.readRecord()
	if err != nil {
		return err
	}
	switch typ {
	case recordAppData:
		if len(c.hs) > 0 {
			return alertf(alertUnexpectedMessage, "application data inside a handshake message")
		}
		c.plain = content
		return nil
	case recordHandshake:
		return c.postHandshake(content)
	}
	return alertf(alertUnexpectedMessage, "record type %d after the handshake", typ)
}

// readRecord reads, decrypts and returns one record; alerts end the
// connection (io.EOF for close_notify).
func (c *Conn) readRecord() (byte, []byte, error) {
	rec, err := readRecord(c.br, c.rbuf, c.in.aead == nil && c.in.seq == 0)
	if err != nil {
		return 0, nil, err
	}
	c.rbuf = rec[:0]
	typ, content, err := c.in.open(rec)
	if err != nil {
		return 0, nil, err
	}
	if typ == recordAlert {
		if len(content) != 2 {
			return 0, nil, alertf(alertDecodeError, "alert of %d bytes", len(content))
		}
		if content[1] == alertCloseNotify {
			return 0, nil, io.EOF
		}
		return 0, nil, &AlertError{Alert: content[1], Remote: true}
	}
	return typ, content, nil
}

// postHandshake handles handshake messages after the handshake: session
// tickets (ignored: there is no resumption) and key updates.
func (c *Conn) postHandshake(content []byte) error {
	c.hs = append(c.hs, content...)
	for {
		msg, err := c.nextHandshakeMsg()
		if msg == nil || err != nil {
			return err
		}
		switch msg[0] {
		case typeNewSessionTicket:
		case typeKeyUpdate:
			if len(msg) != 5 || msg[4] > 1 {
				return alertf(alertDecodeError, "malformed KeyUpdate")
			}
			if len(c.hs) > 0 {
				return alertf(alertUnexpectedMessage, "KeyUpdate not at a record boundary")
			}
			c.in.update()
			if msg[4] == 1 {
				c.wmu.Lock()
				err := c.sendKeyUpdate()
				c.wmu.Unlock()
				if err != nil {
					return err
				}
			}
		default:
			return alertf(alertUnexpectedMessage, "handshake message %d after the handshake", msg[0])
		}
	}
}

// nextHandshakeMsg takes one whole message off c.hs, nil if none is whole.
func (c *Conn) nextHandshakeMsg() ([]byte, error) {
	if len(c.hs) < 4 {
		return nil, nil
	}
	n := int(c.hs[1])<<16 | int(c.hs[2])<<8 | int(c.hs[3])
	if n > maxHandshakeSize {
		return nil, alertf(alertRecordOverflow, "handshake message of %d bytes", n)
	}
	if len(c.hs) < 4+n {
		return nil, nil
	}
	msg := c.hs[: 4+n : 4+n]
	c.hs = c.hs[4+n:]
	if len(c.hs) == 0 {
		c.hs = nil
	}
	return msg, nil
}

// Write sends p as application data records.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.WriteBuffers([][]byte{p})
	return int(n), err
}

// WriteBuffers sends the concatenation of bufs as application data,
// packed into full records and written with one call per 64 KiB, which
// net.Buffers.WriteTo cannot do for a connection outside package net.
func (c *Conn) WriteBuffers(bufs [][]byte) (int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	var total, sent int64
	for _, b := range bufs {
		total += int64(len(b))
	}
	left := total
	for left > 0 {
		c.wbuf = c.wbuf[:0]
		for left > 0 && len(c.wbuf) < 64<<10 {
			if c.out.seq >= c.rekeyAfter {
				c.wbuf = c.appendKeyUpdate(c.wbuf)
			}
			n := int(min(left, maxPlaintext))
			var start int
			c.wbuf, start = beginRecord(c.wbuf, n)
			for n > 0 {
				k := min(n, len(bufs[0]))
				c.wbuf = append(c.wbuf, bufs[0][:k]...)
				bufs[0] = bufs[0][k:]
				if len(bufs[0]) == 0 {
					bufs = bufs[1:]
				}
				n -= k
				left -= int64(k)
			}
			c.wbuf = c.out.sealRecord(c.wbuf, start, recordAppData)
		}
		if _, err := c.raw.Write(c.wbuf); err != nil {
			c.werr = err
			return sent, err
		}
		sent = total - left
	}
	return total, nil
}

// WriteBuffers writes bufs to w as net.Buffers.WriteTo does (and consumes
// them as it does), in full records when w is a *Conn.
func WriteBuffers(w io.Writer, bufs *net.Buffers) (int64, error) {
	if r, ok := w.(*replayConn); ok {
		w = r.Conn // a plaintext connection after Sniff keeps writev
	}
	c, ok := w.(*Conn)
	if !ok {
		return bufs.WriteTo(w)
	}
	n, err := c.WriteBuffers(*bufs)
	*bufs = (*bufs)[len(*bufs):]
	return n, err
}

// appendKeyUpdate appends a KeyUpdate (no update requested) and moves to
// the next sending key. REQUIRES: c.wmu.
func (c *Conn) appendKeyUpdate(dst []byte) []byte {
	dst = c.out.appendRecord(dst, recordHandshake, handshakeMsg(typeKeyUpdate, []byte{0}))
	c.out.update()
	return dst
}

func (c *Conn) sendKeyUpdate() error {
	if c.werr != nil {
		return c.werr
	}
	_, err := c.raw.Write(c.appendKeyUpdate(nil))
	if err != nil {
		c.werr = err
	}
	return err
}

// sendAlert sends a fatal alert (or close_notify), best effort: a writer
// blocked on a full socket keeps the lock and the alert is skipped.
func (c *Conn) sendAlert(a uint8) {
	if !c.wmu.TryLock() {
		return
	}
	defer c.wmu.Unlock()
	if c.werr != nil {
		return
	}
	level := byte(2)
	if a == alertCloseNotify {
		level = 1
	}
	_ = c.raw.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := c.raw.Write(c.out.appendRecord(nil, recordAlert, []byte{level, a}))
	_ = c.raw.SetWriteDeadline(time.Time{})
	c.werr = fmt.Errorf("tls: connection ended by alert %s", alertName(a))
	if err != nil {
		c.werr = err
	}
}

// Close sends close_notify and closes the connection.
func (c *Conn) Close() error {
	c.sendAlert(alertCloseNotify)
	return c.raw.Close()
}

// LocalAddr, RemoteAddr and the deadlines are the underlying connection's.
func (c *Conn) LocalAddr() net.Addr                { return c.raw.LocalAddr() }
func (c *Conn) RemoteAddr() net.Addr               { return c.raw.RemoteAddr() }
func (c *Conn) SetDeadline(t time.Time) error      { return c.raw.SetDeadline(t) }
func (c *Conn) SetReadDeadline(t time.Time) error  { return c.raw.SetReadDeadline(t) }
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }
