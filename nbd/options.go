package nbd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/nvstripe/nvstripe/blockdev"
)

// Export is one device the server offers under a name.
type Export struct {
	// Device serves the IO. The server never closes it.
	Device blockdev.Device
	// Description is shown by clients (nbdinfo) and in NBD_OPT_LIST.
	Description string
	// ReadOnly advertises NBD_FLAG_READ_ONLY and refuses writes with EPERM.
	ReadOnly bool
}

// Options configure a Server. The zero value of a field means its default.
type Options struct {
	// Exports maps export names to exports. More can be added later with
	// AddExport. Default: none.
	Exports map[string]Export
	// DefaultExport is the export served for the empty name. Default: the
	// only export when there is exactly one, otherwise none.
	DefaultExport string
	// MaxRequest is the largest READ or WRITE payload in bytes, advertised as
	// the maximum block payload. A multiple of 4096 from 64 KiB to 1 GiB.
	// Default 32 MiB.
	MaxRequest int
	// MaxInFlight bounds the requests in progress per connection. Default 128.
	MaxInFlight int
	// MaxInFlightBytes bounds the READ/WRITE payload bytes in progress per
	// connection (a single request over it still runs, alone). Default 64 MiB.
	MaxInFlightBytes int
	// NoStructuredReplies refuses NBD_OPT_STRUCTURED_REPLY (and so block
	// status and hole reads). Default false: structured replies are offered.
	NoStructuredReplies bool
	// HandshakeTimeout bounds the option haggling of one connection: one
	// that has not entered transmission by then is closed. Default 30 s.
	HandshakeTimeout time.Duration
	// MaxConnections caps the connections each Serve loop serves at once;
	// one beyond it is closed as soon as it is accepted (and logged).
	// Default 128; negative: no cap.
	MaxConnections int
	// MaxConnectionsPerIP caps the connections each Serve loop serves at
	// once from one remote IP address, so that one peer cannot take every
	// place MaxConnections leaves; one beyond is closed as soon as it is
	// accepted (the first refusal of an address is logged, then none until
	// its connections have all ended). Unix socket peers are not capped by
	// it. Default 32 (a quarter of MaxConnections' default; the kernel's nbd
	// driver and nbdcopy use a few connections each); negative: no cap.
	MaxConnectionsPerIP int
	// RequestTimeout bounds the arrival of a request once its first byte
	// has come: the rest of its header within RequestTimeout, a WRITE's
	// payload within RequestTimeout plus its length at MinPayloadRate (from
	// when the server is ready to read it), and it is how long a WRITE
	// waits for payload memory (MaxPayloadMemory). Replies, the other way,
	// must leave within at least RequestTimeout/2 (at most RequestTimeout)
	// plus their length at MinPayloadRate. A connection that misses either
	// is dropped. Between requests a connection may stay idle for as long
	// as the client likes (the kernel's nbd driver does). Default 20 s;
	// negative: no deadline (the memory wait stays bounded by 20 s).
	RequestTimeout time.Duration
	// MinPayloadRate is the slowest a WRITE payload may arrive, or a reply
	// leave, in bytes per second, on top of RequestTimeout: a 32 MiB
	// payload gets 20 s + 32 s by default. Default 1 MiB/s; negative:
	// RequestTimeout alone.
	MinPayloadRate int
	// MaxPayloadMemory bounds the bytes of request data held at once by
	// all connections of the server: WRITE payloads from before they are
	// read until their write is done, READ data from before the device
	// fills it until the reply is written. Slow senders (or readers) on
	// many connections cannot grow the process. A WRITE that finds no room
	// waits up to RequestTimeout, then its connection is dropped; a READ
	// waits as long, then is answered ENOMEM. At least MaxRequest. Default
	// 256 MiB (or MaxRequest when larger); negative: no bound.
	MaxPayloadMemory int
	// MaxHandshakesPerIP caps the connections from one remote IP address
	// still in the handshake (before NBD_OPT_GO or NBD_OPT_EXPORT_NAME
	// succeeds, TLS included), server-wide; one beyond is closed at once,
	// so that the few addresses of a flood of stalled handshakes hold few
	// places until HandshakeTimeout. Unix socket peers are not capped by
	// it. Default 8 (nbdcopy and nbd-client open 4 at most at once);
	// negative: no cap.
	MaxHandshakesPerIP int
	// MaxHandshakes caps the connections in the handshake server-wide; a
	// connection that finds it full ends the oldest handshake (a client's
	// handshake takes milliseconds; the oldest has nearly always stalled)
	// and takes its place. Default 64, half of MaxConnections' default, so
	// that handshakes alone never fill it; negative: no cap.
	MaxHandshakes int
	// ShutdownGrace is how long Close lets in-flight requests run and their
	// replies drain before cancelling their IO and closing sockets.
	// Default 5 s.
	ShutdownGrace time.Duration
	// LoopbackSendBuffer is the socket send buffer (SO_SNDBUF, which Linux
	// doubles) of TCP connections from a loopback address, whose client
	// runs on this node (the kernel's nbd driver, qemu, fio). A shallow
	// queue keeps a reply's data in cache until the client copies it out;
	// with the kernel's autotuning the buffer grows to 4 MiB, 2-3 MB of
	// replies wait in it, and both copies of that data cost more (on a
	// 2-CPU VM, 1 MiB reads at QD16 ran at 74% of nbdkit's rate with
	// autotuning, 84-89% with this default; see test/bench/nbd.sh). Default
	// 512 KiB; negative leaves the kernel's autotuning. Remote clients
	// always get autotuning, which sizes the buffer to the path.
	LoopbackSendBuffer int
	// ReplyBacklog bounds the reply bytes of a connection waiting to be
	// written before a READ may start its device IO. When the client
	// drains the socket slower than the device fills replies, reading
	// further ahead only lets replies wait until their data has left the
	// cache (a 4+2 volume served 1 MiB reads at QD16 at 82% of nbdkit's
	// rate without the bound, 99% with it). A device slower than the socket
	// keeps the backlog empty, so its READs never wait. Default 2 MiB;
	// negative: no bound.
	ReplyBacklog int
	// PipelineSynchronous runs the requests of a connection side by side
	// even when the export's device is synchronous (blockdev.Synchronous:
	// an in-memory device, or a volume over them). By default such a
	// connection runs its requests one after another on one goroutine, as
	// a single-threaded server would: its IO is CPU work that never waits,
	// so running the next request on another goroutine gains only where a
	// CPU is idle, and costs a thread wakeup and the request's data moving
	// between CPU caches. On a 2-CPU VM shared with fio's client, 1 MiB
	// writes to a 4+2 volume over memory ran at 5275 MiB/s one after
	// another and 3741 MiB/s side by side, at 173 against 237 ms of server
	// CPU per GiB. Clients that want parallelism open several connections
	// (the kernel's nbd driver, nbdcopy). Other devices always run side by
	// side, up to MaxInFlight, to overlap their waiting.
	PipelineSynchronous bool
	// TLS, when set, offers NBD_OPT_STARTTLS with this configuration
	// (certificates; ClientAuth and ClientCAs to require client
	// certificates). When it asks for client certificates and leaves
	// MaxVersion zero, the server caps it at TLS 1.2, where GnuTLS
	// clients (libnbd, qemu) send RSA client certificates, which they do
	// not to Go in TLS 1.3 (see startTLSConfig). Default nil: STARTTLS is
	// answered NBD_REP_ERR_UNSUP.
	TLS *tls.Config
	// RequireTLS refuses every option but STARTTLS and ABORT before TLS
	// (NBD_REP_ERR_TLS_REQD; NBD_OPT_EXPORT_NAME closes the connection),
	// as nbdkit --tls=require does. Needs TLS.
	RequireTLS bool
	// Logf receives one line per notable connection event (protocol
	// violations, IO errors, refused connections). Default: discard.
	Logf func(format string, args ...any)
	// Refused, when set, is called with the reason (one of
	// RefusalReasons) of each connection refused, once Stats has counted
	// it: for metrics. Default: none.
	Refused func(reason string)
}

// Defaults of Options.
const (
	DefaultMaxRequest       = 32 << 20
	DefaultMaxInFlight      = 128
	DefaultMaxInFlightBytes = 64 << 20
	DefaultHandshakeTimeout = 30 * time.Second
	DefaultMaxConnections   = 128
	DefaultMaxConnsPerIP    = 32
	DefaultRequestTimeout   = 20 * time.Second
	DefaultMinPayloadRate   = 1 << 20
	DefaultMaxPayloadMemory = 256 << 20
	DefaultMaxHandshakesIP  = 8
	DefaultMaxHandshakes    = 64
	DefaultShutdownGrace    = 5 * time.Second
	DefaultLoopbackSendBuf  = 512 << 10
	DefaultReplyBacklog     = 2 << 20
)

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.DefaultExport == "" && len(o.Exports) == 1 {
		for name := range o.Exports {
			o.DefaultExport = name
		}
	}
	if o.MaxRequest == 0 {
		o.MaxRequest = DefaultMaxRequest
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.ReplyBacklog == 0 {
		o.ReplyBacklog = DefaultReplyBacklog
	}
	if o.LoopbackSendBuffer == 0 {
		o.LoopbackSendBuffer = DefaultLoopbackSendBuf
	}
	if o.MaxInFlightBytes == 0 {
		o.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = DefaultShutdownGrace
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.MaxConnectionsPerIP == 0 {
		o.MaxConnectionsPerIP = DefaultMaxConnsPerIP
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.MinPayloadRate == 0 {
		o.MinPayloadRate = DefaultMinPayloadRate
	}
	if o.MaxPayloadMemory == 0 {
		o.MaxPayloadMemory = max(DefaultMaxPayloadMemory, o.MaxRequest)
	}
	if o.MaxHandshakesPerIP == 0 {
		o.MaxHandshakesPerIP = DefaultMaxHandshakesIP
	}
	if o.MaxHandshakes == 0 {
		o.MaxHandshakes = DefaultMaxHandshakes
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Validate checks the options after EnsureDefaults.
func (o *Options) Validate() error {
	if o.MaxRequest < 64<<10 || o.MaxRequest > 1<<30 || o.MaxRequest%4096 != 0 {
		return fmt.Errorf("nbd: MaxRequest %d is not a multiple of 4096 from 64 KiB to 1 GiB: %w", o.MaxRequest, blockdev.ErrInvalid)
	}
	if o.MaxInFlight < 1 || o.MaxInFlightBytes < 1 {
		return fmt.Errorf("nbd: MaxInFlight %d and MaxInFlightBytes %d must be positive: %w", o.MaxInFlight, o.MaxInFlightBytes, blockdev.ErrInvalid)
	}
	if o.MaxPayloadMemory > 0 && o.MaxPayloadMemory < o.MaxRequest {
		return fmt.Errorf("nbd: MaxPayloadMemory %d is below MaxRequest %d: %w", o.MaxPayloadMemory, o.MaxRequest, blockdev.ErrInvalid)
	}
	if o.RequireTLS && o.TLS == nil {
		return fmt.Errorf("nbd: RequireTLS without a TLS configuration: %w", blockdev.ErrInvalid)
	}
	if o.HandshakeTimeout < 0 || o.ShutdownGrace < 0 {
		return fmt.Errorf("nbd: negative timeout: %w", blockdev.ErrInvalid)
	}
	for name, e := range o.Exports {
		if err := e.validate(name); err != nil {
			return err
		}
	}
	if _, ok := o.Exports[o.DefaultExport]; o.DefaultExport != "" && !ok {
		return fmt.Errorf("nbd: default export %q does not exist: %w", o.DefaultExport, blockdev.ErrInvalid)
	}
	return nil
}

func (e Export) validate(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("nbd: empty export name (use DefaultExport): %w", blockdev.ErrInvalid)
	case len(name) > 4096 || len(e.Description) > 4096:
		return fmt.Errorf("nbd: export %.40q: name or description over 4096 bytes: %w", name, blockdev.ErrInvalid)
	case e.Device == nil:
		return fmt.Errorf("nbd: export %q has no device: %w", name, blockdev.ErrInvalid)
	}
	bs := e.Device.BlockSize()
	if bs < 512 || bs > 64<<10 || bs&(bs-1) != 0 || e.Device.Size()%512 != 0 {
		return fmt.Errorf("nbd: export %q: block size %d / size %d unusable: %w", name, bs, e.Device.Size(), blockdev.ErrInvalid)
	}
	return nil
}

// ErrServerClosed is returned by Serve, ServeConn and AddExport called after
// Close.
var ErrServerClosed = errors.New("nbd: server closed")
