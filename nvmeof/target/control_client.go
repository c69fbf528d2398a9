package target

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ControlClient calls the control API (ControlHandler) of a running target
// at Addr (HOST:PORT, as given to ServeControl).
type ControlClient struct {
	Addr string
}

// ANAStates lists every (listener, group) state.
func (c ControlClient) ANAStates(ctx context.Context) ([]ANAEntry, error) {
	body, err := c.call(ctx, http.MethodGet, "/v1/ana")
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
	q := url.Values{"listener": {listener}, "group": {strconv.FormatUint(uint64(group), 10)}, "state": {state}}
	_, err := c.call(ctx, http.MethodPost, "/v1/ana?"+q.Encode())
	return err
}

func (c ControlClient) call(ctx context.Context, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("control: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}
