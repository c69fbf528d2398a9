package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/units"
)

// DefaultMapSocketDir is where a foreground `nvstripe map` serves the list
// of its one mapping (VOLUME.sock), for `nvstripe ls`.
const DefaultMapSocketDir = "/run/nvstripe/map"

// MapSocket is the socket a foreground map of volume serves its list on.
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
// foreground map serving a socket in mapDir, by volume, telling warn what
// it skips: a socket that nobody answers on (left by a process that was
// killed), and an agent socket that does not exist.
func ListMappings(ctx context.Context, agentSocket, mapDir string, warn func(string)) []Listed {
	var rows []Listed
	add := func(sock, server string) {
		ms, err := listSocket(ctx, sock)
		if err != nil {
			warn(fmt.Sprintf("skipped %s: %v", sock, err))
			return
		}
		for _, m := range ms {
			rows = append(rows, listed(m, server))
		}
	}
	if api.Listening(agentSocket) {
		add(agentSocket, "agent")
	} else {
		warn(fmt.Sprintf("no agent on %s (is `nvstripe agent` running?): foreground maps only", agentSocket))
	}
	socks, _ := filepath.Glob(filepath.Join(mapDir, "*.sock"))
	for _, s := range socks {
		add(s, "map")
	}
	slices.SortStableFunc(rows, func(x, y Listed) int { return strings.Compare(x.Volume, y.Volume) })
	return rows
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
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
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

// serveList serves the list of a's mappings (List and Status only) on sock
// until the returned stop is called; a socket that cannot be served is
// only logged (the mapping works without it, ls just does not see it).
func serveList(a *Agent, sock string) (stop func()) {
	l, err := listenSocket(sock)
	if err != nil {
		a.logf("map: not listing this mapping for nvstripe ls: %v", err)
		return func() {}
	}
	gs := api.NewServer(listOnly{a: a})
	go gs.Serve(l)
	return func() {
		gs.Stop()
		os.Remove(sock)
	}
}

// listOnly serves List and Status of an agent, nothing that changes it.
type listOnly struct {
	api.UnimplementedAgentServer
	a *Agent
}

func (r listOnly) List(context.Context, *api.ListRequest) (*api.ListReply, error) {
	return &api.ListReply{Mappings: r.a.List()}, nil
}

func (r listOnly) Status(context.Context, *api.StatusRequest) (*api.StatusReply, error) {
	return r.a.Status(), nil
}
