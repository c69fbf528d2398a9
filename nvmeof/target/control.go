package target

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/nvstripe/nvstripe/nvmeof/pdu"
)

// ANAEntry is the state of one ANA group on one listener.
type ANAEntry struct {
	Listener int    `json:"listener"`
	Address  string `json:"address"`
	Group    uint32 `json:"group"`
	State    string `json:"state"`
}

// ANAStates lists every (listener, group) state.
func (t *Target) ANAStates() []ANAEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []ANAEntry
	for _, l := range t.listeners {
		for _, g := range t.groups {
			out = append(out, ANAEntry{Listener: l.idx, Address: l.bound, Group: g, State: l.ana[g].state.String()})
		}
	}
	return out
}

// ANAChange is the JSON body of POST /v1/ana: Listener is an index or an
// address; State a name pdu.ParseANAState accepts.
type ANAChange struct {
	Listener string `json:"listener"`
	Group    uint32 `json:"group"`
	State    string `json:"state"`
}

// maxControlBody bounds a control request body.
const maxControlBody = 64 << 10

// ControlHandler is a small HTTP API for run-time control:
//
//	GET  /v1/ana   JSON list of ANAEntry
//	POST /v1/ana   body: JSON ANAChange, Content-Type application/json
//
// Every request needs the header "Authorization: Bearer TOKEN", loopback
// or not (any local user can reach a loopback port); with token empty
// every request is refused. A request whose Host header names a host by
// name rather than by IP address (other than "localhost"), the mark of a
// DNS-rebinding page, or that carries an Origin header (browsers add it,
// the CLI does not) is refused before the token is looked at. State
// changes come only as a POST with a JSON body and that content type,
// which an HTML form cannot send; a query string is refused. Errors are
// plain-text 4xx responses.
func (t *Target) ControlHandler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ana", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(t.ANAStates())
	})
	mux.HandleFunc("POST /v1/ana", func(w http.ResponseWriter, r *http.Request) {
		ch, err := decodeJSON[ANAChange](w, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := t.setANA(ch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkControlOrigin(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		if token == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "control: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// checkControlOrigin refuses a request that a web page may have sent: an
// Origin header, or a Host header naming a host by name (not an IP
// address, not "localhost").
func checkControlOrigin(r *http.Request) error {
	if r.Header.Get("Origin") != "" {
		return fmt.Errorf("control: requests from web pages (Origin %q) are refused", r.Header.Get("Origin"))
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]") // [::1] without a port
	if host != "localhost" && net.ParseIP(host) == nil {
		return fmt.Errorf("control: Host %q is not an IP address", r.Host)
	}
	return nil
}

// decodeJSON reads a state-changing request's body: JSON only (by
// Content-Type), no query string, no unknown fields, bounded.
func decodeJSON[T any](w http.ResponseWriter, r *http.Request) (T, error) {
	var v T
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return v, fmt.Errorf("control: Content-Type %q, want application/json", r.Header.Get("Content-Type"))
	}
	if r.URL.RawQuery != "" {
		return v, errors.New("control: parameters go in the JSON body, not the query string")
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("control: body: %w", err)
	}
	return v, nil
}

func (t *Target) setANA(ch ANAChange) error {
	li, err := strconv.Atoi(ch.Listener)
	if err != nil {
		if li, err = t.ListenerIndex(ch.Listener); err != nil {
			return err
		}
	}
	st, err := pdu.ParseANAState(ch.State)
	if err != nil {
		return err
	}
	return t.SetANAState(li, ch.Group, st)
}
