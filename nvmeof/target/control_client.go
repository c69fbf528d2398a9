package target

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ControlClient calls the control API (ControlHandler) of a running target
// at Addr (HOST:PORT, as given to ServeControl), with the bearer Token
// the target was given (required: a call without one fails before it is
// sent).
type ControlClient struct {
	Addr  string
	Token string
}

// ANAStates lists every (listener, group) state.
func (c ControlClient) ANAStates(ctx context.Context) ([]ANAEntry, error) {
	body, err := c.call(ctx, http.MethodGet, "/v1/ana", nil)
	if err != nil {
		return nil, err
	}
	var es []ANAEntry
	if err := json.Unmarshal(body, &es); err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	return es, nil
}

// SetANAState sets the state of group on listener (an index or an
// address); state is a name pdu.ParseANAState accepts.
func (c ControlClient) SetANAState(ctx context.Context, listener string, group uint32, state string) error {
	body, err := json.Marshal(ANAChange{Listener: listener, Group: group, State: state})
	if err != nil {
		return err
	}
	_, err = c.call(ctx, http.MethodPost, "/v1/ana", body)
	return err
}

func (c ControlClient) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	if c.Token == "" {
		return nil, fmt.Errorf("control %s: %w", c.Addr, ErrControlToken)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Addr+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("control: %s: %s", resp.Status, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// WriteANAStates prints ANA states for people (`nvstripe target
// ana-state`): one line per listener and group.
func WriteANAStates(w io.Writer, es []ANAEntry) error {
	for _, e := range es {
		if _, err := fmt.Fprintf(w, "listener %d %s group %d %s\n", e.Listener, e.Address, e.Group, e.State); err != nil {
			return err
		}
	}
	return nil
}
