package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nvstripe/nvstripe/agent/api"
	"github.com/nvstripe/nvstripe/nbd"
)

// ErrNotMapped is Unmap's answer for a name nothing on this node serves.
var ErrNotMapped = errors.New("not mapped")

// Unmapped says what Unmap did.
type Unmapped struct {
	Volume string `json:"unmapped"`
	// Device is the mapping's device or URL (/dev/nbdN, /dev/ublkbN, an
	// NBD URL, a FUSE file).
	Device string `json:"device"`
	// Server is who unmapped it: "map" (a foreground map), "agent", or
	// "kernel" (a device whose serving process died, disconnected).
	Server string `json:"server"`
}

// String is the report for people.
func (u Unmapped) String() string {
	if u.Server == "kernel" {
		return "disconnected " + u.Device + " (its serving process had died)"
	}
	who := "its foreground map"
	if u.Server == "agent" {
		who = "the agent"
	}
	return fmt.Sprintf("unmapped %s from %s: %s flushed it, detached it and released its lease", u.Volume, u.Device, who)
}

// Unmap unmaps name, a volume or the device or URL it is served on, on
// this node: it asks the process that registered the mapping (a
// foreground map's socket in mapDir, else the agent on agentSocket) to
// unmap it, which flushes, detaches and releases the lease before it
// answers. A kernel nbd device nothing registered serves is disconnected
// if its server died (nbd.Detach). Anything else is ErrNotMapped.
// agentGiven says the agent socket was named, so that its absence is
// worth saying.
func Unmap(ctx context.Context, name, agentSocket, mapDir string, agentGiven bool) (Unmapped, error) {
	for _, sock := range liveRecords(mapDir) {
		if u, ok := findMapping(ctx, sock, name, "map"); ok {
			return u, unmapOn(ctx, sock, u.Volume)
		}
	}
	agentErr := probeSocket(agentSocket)
	if agentErr == nil {
		if u, ok := findMapping(ctx, agentSocket, name, "agent"); ok {
			return u, unmapOn(ctx, agentSocket, u.Volume)
		}
	}
	if strings.HasPrefix(name, "/dev/nbd") {
		err := nbd.Detach(ctx, name)
		if errors.Is(err, nbd.ErrNoDevice) {
			return Unmapped{}, fmt.Errorf("unmap %s: %w: %w", name, ErrNotMapped, err)
		}
		return Unmapped{Device: name, Server: "kernel"}, err
	}
	why := fmt.Sprintf("no foreground map registered in %s serves it, nor the agent on %s", mapDir, agentSocket)
	if agentErr != nil && agentGiven {
		why = fmt.Sprintf("no foreground map registered in %s serves it, and no agent answers on %s", mapDir, agentSocket)
	}
	return Unmapped{}, fmt.Errorf("unmap %s: %w on this node (%s)", name, ErrNotMapped, why)
}

// findMapping looks for the mapping of name (its volume or device) among
// those the API on sock serves.
func findMapping(ctx context.Context, sock, name, server string) (Unmapped, bool) {
	ms, err := listSocket(ctx, sock)
	if err != nil {
		return Unmapped{}, false
	}
	for _, m := range ms {
		if m.Volume == name || m.Url == name {
			return Unmapped{Volume: m.Volume, Device: m.Url, Server: server}, true
		}
	}
	return Unmapped{}, false
}

// unmapOn asks the API on sock to unmap volume.
func unmapOn(ctx context.Context, sock, volume string) error {
	return api.WithClient(sock, func(c *api.Client) error {
		_, err := c.Unmap(ctx, &api.UnmapRequest{Volume: volume})
		return err
	})
}
