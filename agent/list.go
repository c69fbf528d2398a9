package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/internal/table"
	"github.com/nvstripe/nvstripe/internal/units"
)

// DefaultMapSocketDir is where a foreground `nvstripe map` registers its
// one mapping (VOLUME.sock, see control), for `nvstripe ls` and `unmap`.
const DefaultMapSocketDir = "/run/nvstripe/map"

// MapSocket is the socket a foreground map of volume registers on.
func MapSocket(dir, volume string) string { return filepath.Join(dir, volume+".sock") }

// Listed is one row of `nvstripe ls`: a mapping and who serves it.
type Listed struct {
	// Device is what clients use: /dev/nbdN, /dev/ublkbN, an NBD URL or a
	// FUSE file ("" while not served).
	Device string `json:"device"`
	Volume string `json:"volume"`
	// Mode is "rw" or "ro".
	Mode string `json:"mode"`
	// Epoch is the ownership lease's epoch (0 while none is held).
	Epoch int64 `json:"epoch"`
	// Health is an api.Health* value ("" while not served).
	Health string `json:"health"`
	// State is an api.State* value.
	State string `json:"state"`
	// Server is "agent" (the node agent) or "map" (a foreground map).
	Server         string   `json:"server"`
	Holder         string   `json:"holder"`
	Size           int64    `json:"size"`
	DownNamespaces []string `json:"down_namespaces"`
	Error          string   `json:"error"`
}

// ListMappings lists the mappings of the agent on agentSocket and of every
// foreground map registered in mapDir, by volume. It removes the records of
// maps that died (a socket nobody listens on). It tells warn what it
// skips: a record it cannot read, and, when the agent was named
// (agentGiven), an agent that does not answer.
func ListMappings(ctx context.Context, agentSocket, mapDir string, agentGiven bool, warn func(string)) []Listed {
	rows := []Listed{}
	if err := probeSocket(agentSocket); err == nil {
		rows = addListed(ctx, rows, agentSocket, "agent", warn)
	} else if agentGiven {
		warn(fmt.Sprintf("no agent answers on %s (is `nvstripe agent` running?): %v", agentSocket, err))
	}
	for _, s := range liveRecords(mapDir) {
		rows = addListed(ctx, rows, s, "map", warn)
	}
	slices.SortStableFunc(rows, func(x, y Listed) int { return strings.Compare(x.Volume, y.Volume) })
	return rows
}

// addListed appends the mappings of the API on sock to rows, served by
// server; one it cannot list is left out with a warning.
func addListed(ctx context.Context, rows []Listed, sock, server string, warn func(string)) []Listed {
	ms, err := listSocket(ctx, sock)
	if err != nil {
		warn(fmt.Sprintf("skipped %s: %v", sock, err))
		return rows
	}
	for _, m := range ms {
		rows = append(rows, listed(m, server))
	}
	return rows
}

// liveRecords returns the sockets of the foreground maps registered in
// dir, removing those whose process died (nobody listens on them).
func liveRecords(dir string) []string {
	socks, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
	live := socks[:0]
	for _, s := range socks {
		if err := probeSocket(s); errors.Is(err, syscall.ECONNREFUSED) {
			os.Remove(s)
			continue
		}
		live = append(live, s)
	}
	return live
}

// probeSocket connects to the unix socket path: nil when someone accepts,
// an error wrapping syscall.ECONNREFUSED when the file is left by a
// process that died, another error when there is none (or no access).
func probeSocket(path string) error {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// listSocket asks the API on sock for its mappings.
func listSocket(ctx context.Context, sock string) ([]*api.Mapping, error) {
	c, err := api.Dial(sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	l, err := c.List(ctx, &api.ListRequest{})
	if err != nil {
		return nil, err
	}
	return l.Mappings, nil
}

func listed(m *api.Mapping, server string) Listed {
	mode := "rw"
	if m.ReadOnly {
		mode = "ro"
	}
	return Listed{Device: m.Url, Volume: m.Volume, Mode: mode, Epoch: m.Epoch, Health: m.Health, State: m.State,
		Server: server, Holder: m.Holder, Size: m.Size, DownNamespaces: m.DownNamespaces, Error: m.Error}
}

// WriteListed prints rows as a table for people.
func WriteListed(out io.Writer, rows []Listed) error {
	w := table.New(out)
	fmt.Fprintln(w, "DEVICE\tVOLUME\tMODE\tEPOCH\tHEALTH\tSIZE\tSERVER\tNOTE")
	for _, r := range rows {
		note := r.Error
		if len(r.DownNamespaces) > 0 {
			note = strings.TrimPrefix(note+"; down: "+strings.Join(r.DownNamespaces, ","), "; ")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", dash(r.Device), r.Volume, r.Mode, r.Epoch, dash(r.Health),
			units.FormatSize(r.Size), r.Server, dash(note))
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
