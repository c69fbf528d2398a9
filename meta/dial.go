package meta

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// DialError is Open's ErrUnreachable: no endpoint answered. It says, for
// each endpoint, what a probe of it found (a name that does not resolve,
// nothing listening, a TLS mismatch, a service that is not etcd's client
// port, no answer at all) and where the endpoints came from.
type DialError struct {
	Endpoints []string
	From      string   // where the endpoints came from ("flag --etcd", ...); "" if unknown
	Problems  []string // per endpoint, what its probe found; "" when it found nothing wrong
	Err       error    // the etcd client's error
}

func (e *DialError) Error() string {
	at := strings.Join(e.Endpoints, ",")
	switch e.From {
	case "":
	case "default":
		at += " (the default: set --etcd, NVSTRIPE_ETCD or etcd.endpoints in the config file)"
	default:
		at += " (from " + e.From + ")"
	}
	var found []string
	for i, p := range e.Problems {
		if p != "" && len(e.Endpoints) > 1 {
			p = e.Endpoints[i] + ": " + p
		}
		if p != "" {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return fmt.Sprintf("%v at %s: %v (is etcd running there? start one with `nvstripe etcd --dir DIR`, "+
			"or pass --etcd with your cluster's endpoints)", ErrUnreachable, at, e.Err)
	}
	return fmt.Sprintf("%v at %s: %s (%v)", ErrUnreachable, at, strings.Join(found, "; "), e.Err)
}

// Diagnosed reports whether the probes found something at an endpoint, so
// the error says more than that etcd did not answer.
func (e *DialError) Diagnosed() bool {
	return slices.ContainsFunc(e.Problems, func(p string) bool { return p != "" })
}

func (e *DialError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }

// probeTimeout bounds each step of an endpoint's probe (a lookup, a
// connect, a TLS handshake, an answer); all of them together get three
// times as long.
const probeTimeout = 2 * time.Second

// diagnose probes every endpoint at once, after the first request to etcd
// failed with err, and returns the DialError. The probes get at most three
// times probeTimeout beyond ctx's deadline (which has usually passed).
func diagnose(ctx context.Context, cfg Config, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return unreachable(cfg.Endpoints, err) // interrupted: no time to look
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*probeTimeout)
	defer cancel()
	d := &DialError{Endpoints: cfg.Endpoints, From: cfg.EndpointsFrom, Problems: make([]string, len(cfg.Endpoints)), Err: err}
	done := make(chan struct{})
	for i, ep := range cfg.Endpoints {
		go func() {
			d.Problems[i] = probeEndpoint(pctx, ep, cfg.TLS, probeTimeout)
			done <- struct{}{}
		}()
	}
	for range cfg.Endpoints {
		<-done
	}
	return d
}

// probeEndpoint looks at one endpoint the way the client reaches it and
// says in a sentence what is wrong there ("" when it cannot tell): the
// name, the TCP connection, TLS, and an HTTP request for /health, which
// etcd's client port answers and its peer port does not.
func probeEndpoint(ctx context.Context, ep string, tc *tls.Config, step time.Duration) string {
	scheme, addr := splitEndpoint(ep)
	if scheme == "unix" || scheme == "unixs" {
		return ""
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q is not HOST:PORT (%v)", addr, err)
	}
	if net.ParseIP(host) == nil {
		lctx, cancel := context.WithTimeout(ctx, step)
		_, err := net.DefaultResolver.LookupHost(lctx, host)
		cancel()
		if err != nil {
			return fmt.Sprintf("the name %s does not resolve (%v): check its spelling, or give an IP address", host, dnsReason(err))
		}
	}
	conn, problem := dialProbe(ctx, addr, step)
	if conn == nil {
		return problem
	}
	defer conn.Close()
	wantTLS := scheme == "https" || scheme == "" && tc != nil
	if wantTLS {
		tconn, problem := tlsProbe(ctx, conn, host, tc, step)
		if tconn == nil {
			return problem
		}
		conn = tconn
	}
	return healthProbe(ctx, conn, addr, wantTLS, step)
}

// splitEndpoint splits an etcd endpoint into its scheme ("" for none) and
// its host:port.
func splitEndpoint(ep string) (scheme, addr string) {
	if s, rest, ok := strings.Cut(ep, "://"); ok {
		return strings.ToLower(s), strings.TrimSuffix(rest, "/")
	}
	return "", ep
}

// dnsReason is the short reason of a failed lookup.
func dnsReason(err error) string {
	var de *net.DNSError
	if errors.As(err, &de) {
		return de.Err
	}
	return err.Error()
}

// dialProbe opens a TCP connection to addr, or says why it could not.
func dialProbe(ctx context.Context, addr string, step time.Duration) (net.Conn, string) {
	d := net.Dialer{Timeout: step}
	conn, err := d.DialContext(ctx, "tcp", addr)
	switch {
	case err == nil:
		return conn, ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Sprintf("nothing listens at %s (connection refused): is etcd running there, and is this its "+
			"client port (usually 2379)? start one with `nvstripe etcd --dir DIR`", addr)
	case isTimeout(err):
		return nil, fmt.Sprintf("no answer from %s within %v, not even to open a TCP connection: a firewall "+
			"dropping packets, or a host that is down or unroutable", addr, step)
	}
	return nil, fmt.Sprintf("cannot connect to %s: %v", addr, err)
}

// isTimeout says whether err is a deadline that passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// tlsAdvice names the settings that give the client etcd's CA.
const tlsAdvice = "--etcd-cacert (NVSTRIPE_ETCD_CACERT, or etcd.cacert in the config file)"

// tlsProbe does the TLS handshake the client would, or says why it fails.
func tlsProbe(ctx context.Context, conn net.Conn, host string, tc *tls.Config, step time.Duration) (net.Conn, string) {
	cfg := &tls.Config{}
	if tc != nil {
		cfg = tc.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	cfg.NextProtos = []string{"http/1.1"}
	tconn := tls.Client(conn, cfg)
	hctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	err := tconn.HandshakeContext(hctx)
	if err == nil {
		return tconn, ""
	}
	addr := conn.RemoteAddr().String()
	if (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) && speaksHTTP(ctx, addr, step) {
		return nil, notTLS(addr)
	}
	return nil, tlsProblem(err, addr, host, step)
}

// notTLS is the advice for a TLS client at a plain server.
func notTLS(addr string) string {
	return fmt.Sprintf("%s is not a TLS server (it answered in plain text), but the client uses TLS: give the "+
		"endpoint as http://%s, or drop %s and --etcd-cert/--etcd-key", addr, addr, tlsAdvice)
}

// speaksHTTP says whether addr answers a plain HTTP request.
func speaksHTTP(ctx context.Context, addr string, step time.Duration) bool {
	conn, _ := dialProbe(ctx, addr, step)
	if conn == nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(step))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if req.Write(conn) != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// tlsProblem says what a TLS error means for the operator.
func tlsProblem(err error, addr, host string, step time.Duration) string {
	var rh tls.RecordHeaderError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	switch {
	case errors.As(err, &rh):
		return notTLS(addr)
	case errors.As(err, &ua):
		return fmt.Sprintf("the TLS certificate of %s is not trusted (signed by an unknown authority): give the CA "+
			"that signed it with %s", addr, tlsAdvice)
	case errors.As(err, &he):
		return fmt.Sprintf("the TLS certificate of %s is not valid for the name %s (%v): use a name or address the "+
			"certificate lists", addr, host, err)
	case errors.As(err, &ci):
		return fmt.Sprintf("the TLS certificate of %s is not valid (%v)", addr, err)
	case strings.Contains(err.Error(), "tls: certificate required") || strings.Contains(err.Error(), "tls: bad certificate"):
		return fmt.Sprintf("%s wants a client certificate it trusts: give one with --etcd-cert and --etcd-key "+
			"(NVSTRIPE_ETCD_CERT, NVSTRIPE_ETCD_KEY)", addr)
	case strings.Contains(err.Error(), "remote error: tls:"): // an alert the server sent
		return fmt.Sprintf("%s refused the TLS handshake (%v)", addr, err)
	case isTimeout(err):
		return fmt.Sprintf("%s accepted a connection but did not answer the TLS handshake within %v: not a TLS "+
			"server, or not etcd", addr, step)
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return fmt.Sprintf("%s closed the connection during the TLS handshake: not a TLS server, or it refused this client", addr)
	}
	return fmt.Sprintf("TLS handshake with %s failed: %v", addr, err)
}

// healthProbe asks for /health over conn, or says why the answer is not
// etcd's.
func healthProbe(ctx context.Context, conn net.Conn, addr string, tlsUsed bool, step time.Duration) string {
	_ = conn.SetDeadline(time.Now().Add(step))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	req.Close = true
	if err := req.Write(conn); err != nil {
		return fmt.Sprintf("%s closed the connection: not an etcd client endpoint? (%v)", addr, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return answerProblem(ctx, err, addr, tlsUsed, step)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case strings.Contains(string(body), "HTTPS server"):
		return plainToTLS(addr)
	case strings.Contains(string(body), `"health"`) && resp.StatusCode == http.StatusOK:
		return fmt.Sprintf("etcd at %s answers its health check but not this request in time: an overloaded etcd? "+
			"retry, or allow more time with --etcd-timeout", addr)
	case strings.Contains(string(body), `"health"`):
		return fmt.Sprintf("etcd answers at %s but reports itself unhealthy (%s): has it lost its quorum?",
			addr, strings.TrimSpace(string(body)))
	}
	return fmt.Sprintf("%s answers HTTP (%s) but not as an etcd client endpoint: is it etcd's peer port "+
		"(usually 2380) or another service? clients use etcd's client port (usually 2379)", addr, resp.Status)
}

// answerProblem says why a peer's answer to an HTTP request was not one.
func answerProblem(ctx context.Context, err error, addr string, tlsUsed bool, step time.Duration) string {
	switch {
	case strings.Contains(err.Error(), "remote error: tls:"): // TLS 1.3: a refused client certificate shows here
		return tlsProblem(err, addr, "", step)
	case isTimeout(err):
		return fmt.Sprintf("%s accepts connections but sent nothing back within %v: not etcd's client port, "+
			"or a stuck server", addr, step)
	case !tlsUsed && speaksTLS(ctx, addr, step):
		return plainToTLS(addr)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return fmt.Sprintf("%s closed the connection without an answer: not an etcd client endpoint "+
			"(etcd's client port is usually 2379, its peer port 2380)", addr)
	}
	return fmt.Sprintf("%s answers, but not in HTTP (%v): not an etcd client endpoint "+
		"(etcd's client port is usually 2379)", addr, err)
}

// plainToTLS is the advice for a plain client at a TLS server.
func plainToTLS(addr string) string {
	return fmt.Sprintf("%s speaks TLS but the client connects in plain text: give the endpoint as https://%s "+
		"and etcd's CA with %s", addr, addr, tlsAdvice)
}

// speaksTLS says whether addr completes a TLS handshake (its certificate
// unchecked: only the protocol matters here).
func speaksTLS(ctx context.Context, addr string, step time.Duration) bool {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: step}, Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a probe, no data
	hctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	conn, err := d.DialContext(hctx, "tcp", addr)
	if err != nil {
		return strings.Contains(err.Error(), "remote error: tls:")
	}
	conn.Close()
	return true
}

// refused is Open's error when etcd answered but refused the client's
// credentials or access to the cluster's keys under root; nil for any
// other error. Not ErrUnreachable: etcd was reached.
func refused(cfg Config, root string, err error) error {
	at := strings.Join(cfg.Endpoints, ",")
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return fmt.Errorf("etcd at %s refused user %q: wrong user name or password (--etcd-user; the password comes "+
			"from --etcd-password-file or NVSTRIPE_ETCD_PASSWORD): %w", at, cfg.Username, err)
	case errors.Is(err, rpctypes.ErrUserEmpty):
		return fmt.Errorf("etcd at %s requires authentication: pass --etcd-user and a password (--etcd-password-file "+
			"or NVSTRIPE_ETCD_PASSWORD): %w", at, err)
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return fmt.Errorf("etcd at %s: user %q may not read this cluster's keys (%s): grant one of its roles "+
			"readwrite on them (`etcdctl role grant-permission ROLE readwrite %s --prefix`): %w", at, cfg.Username, root, root, err)
	}
	return nil
}
