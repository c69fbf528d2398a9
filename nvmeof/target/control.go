package target

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

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

// ControlHandler is a small HTTP API for run-time control, meant to be
// served on 127.0.0.1 only:
//
//	GET  /v1/ana                                   JSON list of ANAEntry
//	POST /v1/ana?listener=L&group=G&state=S        set a state (L: index or address;
//	                                               S: optimized, non-optimized,
//	                                               inaccessible, persistent-loss, change)
//
// Errors are plain-text 4xx responses.
func (t *Target) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ana", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(t.ANAStates())
	})
	mux.HandleFunc("POST /v1/ana", func(w http.ResponseWriter, r *http.Request) {
		if err := t.setANAFromRequest(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

func (t *Target) setANAFromRequest(r *http.Request) error {
	q := r.URL.Query()
	li, err := strconv.Atoi(q.Get("listener"))
	if err != nil {
		if li, err = t.ListenerIndex(q.Get("listener")); err != nil {
			return err
		}
	}
	g, err := strconv.ParseUint(q.Get("group"), 10, 32)
	if err != nil {
		return fmt.Errorf("group %q: %w", q.Get("group"), err)
	}
	st, err := pdu.ParseANAState(q.Get("state"))
	if err != nil {
		return err
	}
	return t.SetANAState(li, uint32(g), st)
}
