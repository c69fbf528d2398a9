package admin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nvstripe/nvstripe/internal/retry"
)

// Watch calls fn with the cluster status now and then every interval until
// ctx ends (nil) or a call fails; interval <= 0 calls it once.
func Watch(ctx context.Context, ops Ops, interval time.Duration, fn func(*StatusReply) error) error {
	for {
		st, err := ops.Status(ctx, &StatusRequest{})
		if err != nil {
			if ctx.Err() != nil && interval > 0 {
				return nil
			}
			return err
		}
		if err := fn(st); err != nil || interval <= 0 {
			return err
		}
		if retry.Sleep(ctx, interval) != nil {
			return nil
		}
	}
}

// WriteRefreshHeader starts one refresh of `admin status --watch` for
// people: a line with the time it was read and what changed since prev
// (nil for the first refresh), then a blank line.
func WriteRefreshHeader(w io.Writer, at time.Time, prev, cur *StatusReply) error {
	what := ""
	if prev != nil {
		what = ": no change"
		if ch := StatusChanges(prev, cur); len(ch) > 0 {
			what = ": " + strings.Join(ch, "; ")
		}
	}
	_, err := fmt.Fprintf(w, "--- %s%s ---\n\n", at.Format(time.RFC3339), what)
	return err
}

// StatusChanges lists, for people, what differs between two statuses:
// the leader, volumes and namespaces that came or went, volume health and
// owners, namespace states, and the numbers of tasks and blocked shards.
// Progress within a task and bytes used are left out (they change on
// every refresh of a busy cluster).
func StatusChanges(prev, cur *StatusReply) []string {
	var out []string
	if prev.Leader != cur.Leader {
		out = append(out, fmt.Sprintf("leader %s -> %s", dash(prev.Leader), dash(cur.Leader)))
	}
	out = append(out, keyedChanges("volume", prev.Volumes, cur.Volumes, (*VolumeStatus).GetVolume,
		func(v *VolumeStatus) string { return v.Health + ", owner " + dash(v.Owner) })...)
	out = append(out, keyedChanges("namespace", prev.Namespaces, cur.Namespaces, (*NamespaceStatus).GetId,
		(*NamespaceStatus).GetState)...)
	if len(prev.Tasks) != len(cur.Tasks) {
		out = append(out, fmt.Sprintf("tasks %d -> %d", len(prev.Tasks), len(cur.Tasks)))
	}
	if len(prev.Blocked) != len(cur.Blocked) {
		out = append(out, fmt.Sprintf("blocked shards %d -> %d", len(prev.Blocked), len(cur.Blocked)))
	}
	return out
}

// keyedChanges compares two lists of rows by key: rows added, removed, and
// rows whose summary changed.
func keyedChanges[T any](what string, prev, cur []T, key, summary func(T) string) []string {
	before := map[string]string{}
	for _, r := range prev {
		before[key(r)] = summary(r)
	}
	var out []string
	for _, r := range cur {
		k, s := key(r), summary(r)
		old, ok := before[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s %s added (%s)", what, k, s))
		case old != s:
			out = append(out, fmt.Sprintf("%s %s: %s -> %s", what, k, old, s))
		}
		delete(before, k)
	}
	for _, r := range prev {
		if _, gone := before[key(r)]; gone {
			out = append(out, fmt.Sprintf("%s %s removed", what, key(r)))
		}
	}
	return out
}
